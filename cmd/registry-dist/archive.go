package main

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// binaryName is the plugin's executable: kubectl finds plugins by the kubectl- prefix.
const binaryName = "kubectl-registry"

// completionName is the plugin's completion executable: kubectl (1.26 or later) runs
// kubectl_complete-<plugin> from PATH to complete "kubectl registry ...".
const completionName = "kubectl_complete-registry"

// archiveTime is the modification time of every archive entry, so that building the
// same binaries twice gives byte-identical archives (and checksums).
var archiveTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// exeName returns the binary's file name on os.
func exeName(goos string) string {
	if goos == "windows" {
		return binaryName + ".exe"
	}
	return binaryName
}

// completionExeName returns the completion executable's file name on os.
func completionExeName(goos string) string {
	if goos == "windows" {
		return completionName + ".exe"
	}
	return completionName
}

// archiveName returns the release archive of a platform: .zip on windows, else .tar.gz.
func archiveName(version string, p osArch) string {
	ext := ".tar.gz"
	if p.OS == "windows" {
		ext = ".zip"
	}
	return fmt.Sprintf("%s_%s_%s_%s%s", binaryName, version, p.OS, p.Arch, ext)
}

// archiveEntry is a file to put into an archive.
type archiveEntry struct {
	Name string
	Mode fs.FileMode
	Data []byte
}

// writeArchive writes entries to path as a zip file when path ends in .zip, else as a
// gzip-compressed tar file.
func writeArchive(path string, entries []archiveEntry) (retErr error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if err := f.Close(); err != nil && retErr == nil {
			retErr = err
		}
	}()
	w := bufio.NewWriter(f)
	if strings.HasSuffix(path, ".zip") {
		err = writeZip(w, entries)
	} else {
		err = writeTarGz(w, entries)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return w.Flush()
}

func writeTarGz(w io.Writer, entries []archiveEntry) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		hdr := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     e.Name,
			Mode:     int64(e.Mode.Perm()),
			Size:     int64(len(e.Data)),
			ModTime:  archiveTime,
			Format:   tar.FormatPAX,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(e.Data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

func writeZip(w io.Writer, entries []archiveEntry) error {
	zw := zip.NewWriter(w)
	for _, e := range entries {
		hdr := &zip.FileHeader{Name: e.Name, Method: zip.Deflate, Modified: archiveTime}
		hdr.SetMode(e.Mode.Perm())
		fw, err := zw.CreateHeader(hdr)
		if err != nil {
			return err
		}
		if _, err := fw.Write(e.Data); err != nil {
			return err
		}
	}
	return zw.Close()
}

// readArchive returns the regular files of a .tar.gz or .zip archive, recognised by
// content (as krew does), with their modes.
func readArchive(path string) ([]archiveEntry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var entries []archiveEntry
	switch {
	case bytes.HasPrefix(data, []byte("PK\x03\x04")):
		zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for _, f := range zr.File {
			if !f.Mode().IsRegular() {
				continue
			}
			rc, err := f.Open()
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", path, f.Name, err)
			}
			b, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", path, f.Name, err)
			}
			entries = append(entries, archiveEntry{Name: f.Name, Mode: f.Mode(), Data: b})
		}
	case bytes.HasPrefix(data, []byte{0x1f, 0x8b}):
		gz, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		tr := tar.NewReader(gz)
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			if hdr.Typeflag != tar.TypeReg {
				continue
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", path, hdr.Name, err)
			}
			entries = append(entries, archiveEntry{Name: hdr.Name, Mode: fs.FileMode(hdr.Mode).Perm(), Data: b})
		}
	default:
		return nil, fmt.Errorf("%s is neither a zip nor a gzip-compressed tar archive", path)
	}
	return entries, nil
}

// installedFiles returns what krew installs from an archive with files: each operation
// copies the entries matching its From glob (a matched directory with its contents) into
// its To directory. Without files krew installs the archive as it is. The result maps
// the installed path (slash-separated, relative to the plugin's directory) to the entry.
func installedFiles(entries []archiveEntry, ops []FileOperation) map[string]archiveEntry {
	out := map[string]archiveEntry{}
	if ops == nil {
		for _, e := range entries {
			out[path.Clean(e.Name)] = e
		}
		return out
	}
	for _, op := range ops {
		from := path.Clean(strings.TrimPrefix(op.From, "/"))
		for _, e := range entries {
			name := path.Clean(e.Name)
			// The glob matches the entry itself or one of its parent directories.
			for dir, rest := name, ""; dir != "." && dir != "/"; dir, rest = path.Dir(dir), path.Join(path.Base(dir), rest) {
				if ok, _ := path.Match(from, dir); ok {
					out[path.Join(op.To, path.Base(dir), rest)] = e
					break
				}
			}
		}
	}
	return out
}

// isLicense reports whether a file name is a license file.
func isLicense(name string) bool {
	base := strings.ToUpper(path.Base(name))
	return strings.HasPrefix(base, "LICENSE") || strings.HasPrefix(base, "LICENCE") || strings.HasPrefix(base, "COPYING")
}

// checkArchive checks what krew would install from the archive at archivePath for the
// platform p of os goos: the bin is there (and executable, except on windows) and a
// license file is installed with it. It returns every problem.
func checkArchive(archivePath string, p Platform, goos string) []string {
	entries, err := readArchive(archivePath)
	if err != nil {
		return []string{err.Error()}
	}
	var probs []string
	installed := installedFiles(entries, p.Files)
	bin, ok := installed[path.Clean(p.Bin)]
	switch {
	case !ok:
		names := slices.Sorted(maps.Keys(installed))
		probs = append(probs, fmt.Sprintf("%s: bin %q is not installed from the archive (installed: %s)",
			filepath.Base(archivePath), p.Bin, strings.Join(names, ", ")))
	case goos != "windows" && bin.Mode.Perm()&0o111 == 0:
		probs = append(probs, fmt.Sprintf("%s: bin %q is not executable (mode %v)", filepath.Base(archivePath), p.Bin, bin.Mode.Perm()))
	}
	if !slices.ContainsFunc(slices.Collect(maps.Keys(installed)), isLicense) {
		probs = append(probs, fmt.Sprintf("%s: no license file (LICENSE*, COPYING*) is installed from the archive", filepath.Base(archivePath)))
	}
	return probs
}

// checkCompletion checks that krew installs the completion executable of os goos from
// the archive at archivePath for the platform p, executable (except on windows).
func checkCompletion(archivePath string, p Platform, goos string) []string {
	entries, err := readArchive(archivePath)
	if err != nil {
		return nil // reported by checkArchive
	}
	name := completionExeName(goos)
	comp, ok := installedFiles(entries, p.Files)[name]
	switch {
	case !ok:
		return []string{fmt.Sprintf("%s: the completion executable %q is not installed from the archive", filepath.Base(archivePath), name)}
	case goos != "windows" && comp.Mode.Perm()&0o111 == 0:
		return []string{fmt.Sprintf("%s: the completion executable %q is not executable (mode %v)", filepath.Base(archivePath), name, comp.Mode.Perm())}
	}
	return nil
}

// sha256File returns the lowercase hex sha256 of a file.
func sha256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }() // read only: a failed close loses nothing
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// checksumsFile renders sums (file name -> sha256) in sha256sum's format, sorted by name.
func checksumsFile(sums map[string]string) []byte {
	names := slices.Sorted(maps.Keys(sums))
	var b bytes.Buffer
	for _, n := range names {
		fmt.Fprintf(&b, "%s  %s\n", sums[n], n)
	}
	return b.Bytes()
}

// parseChecksums reads a sha256sum-format file.
func parseChecksums(data []byte) (map[string]string, error) {
	sums := map[string]string{}
	for i, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok || !validSHA256.MatchString(sum) || name == "" {
			return nil, fmt.Errorf("checksums line %d: %q is not \"<sha256>  <file>\"", i+1, line)
		}
		sums[name] = sum
	}
	return sums, nil
}
