package main

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// fakeELF returns the header of a little-endian ELF64 executable for machine: what
// checkBinary reads of a binary. With interp it has a PT_INTERP program header, as a
// dynamically linked binary does.
func fakeELF(machine elf.Machine, interp bool) []byte {
	var b bytes.Buffer
	b.Write([]byte{0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT), byte(elf.ELFOSABI_NONE)})
	b.Write(make([]byte, 8)) // the rest of e_ident
	var phoff uint64
	var phnum uint16
	if interp {
		phoff, phnum = 64, 1
	}
	le := binary.LittleEndian
	_ = binary.Write(&b, le, uint16(elf.ET_EXEC))
	_ = binary.Write(&b, le, uint16(machine))
	_ = binary.Write(&b, le, uint32(elf.EV_CURRENT))
	_ = binary.Write(&b, le, uint64(0x401000)) // e_entry
	_ = binary.Write(&b, le, phoff)
	_ = binary.Write(&b, le, uint64(0)) // e_shoff
	_ = binary.Write(&b, le, uint32(0)) // e_flags
	_ = binary.Write(&b, le, uint16(64))
	_ = binary.Write(&b, le, uint16(56))
	_ = binary.Write(&b, le, phnum)
	_ = binary.Write(&b, le, uint16(64))
	_ = binary.Write(&b, le, uint16(0)) // e_shnum
	_ = binary.Write(&b, le, uint16(0)) // e_shstrndx
	if interp {
		_ = binary.Write(&b, le, uint32(elf.PT_INTERP))
		_ = binary.Write(&b, le, uint32(elf.PF_R))
		b.Write(make([]byte, 48)) // offset, addresses, sizes, alignment
	}
	b.WriteString("kubectl-registry for " + machine.String())
	return b.Bytes()
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestCheckBinary(t *testing.T) {
	dir := t.TempDir()
	files := map[string][]byte{
		"amd64":   fakeELF(elf.EM_X86_64, false),
		"arm64":   fakeELF(elf.EM_AARCH64, false),
		"dynamic": fakeELF(elf.EM_X86_64, true),
		"script":  []byte("#!/bin/sh\necho not a binary\n"),
	}
	for n, data := range files {
		writeFile(t, filepath.Join(dir, n), data)
	}
	tests := []struct {
		file, arch string
		wantErr    string // "" for none
	}{
		{file: "amd64", arch: "amd64"},
		{file: "arm64", arch: "arm64"},
		{file: "arm64", arch: "amd64", wantErr: "built for EM_AARCH64, not for amd64"},
		{file: "amd64", arch: "arm64", wantErr: "built for EM_X86_64, not for arm64"},
		{file: "dynamic", arch: "amd64", wantErr: "dynamically linked"},
		{file: "script", arch: "amd64", wantErr: "not a linux executable"},
		{file: "amd64", arch: "mips", wantErr: `architecture "mips"`},
		{file: "missing", arch: "amd64", wantErr: "not a linux executable"},
	}
	for _, tt := range tests {
		t.Run(tt.file+" for "+tt.arch, func(t *testing.T) {
			err := checkBinary(filepath.Join(dir, tt.file), tt.arch)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("checkBinary: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("checkBinary: %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// binDir writes fake static binaries for amd64 and arm64 where make image-index builds
// them, and returns the directory.
func binDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "linux_amd64", binaryName), fakeELF(elf.EM_X86_64, false))
	writeFile(t, filepath.Join(dir, "linux_arm64", binaryName), fakeELF(elf.EM_AARCH64, false))
	return dir
}

// platformsOf describes every image of idx: its platform in the index, its config's
// platform and entrypoint, and the ELF machine of its binary.
func platformsOf(t *testing.T, idx v1.ImageIndex) []string {
	t.Helper()
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range m.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), binaryName)
		if err := extractFile(img, binaryName, path); err != nil {
			t.Fatal(err)
		}
		f, err := elf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, strings.Join([]string{
			"index " + d.Platform.OS + "/" + d.Platform.Architecture,
			"config " + cf.OS + "/" + cf.Architecture,
			"entrypoint " + strings.Join(cf.Config.Entrypoint, " "),
			"user " + cf.Config.User,
			"binary " + f.Machine.String(),
		}, ", "))
		f.Close()
	}
	return got
}

var wantPlatforms = []string{
	"index linux/amd64, config linux/amd64, entrypoint /kubectl-registry serve, user 65532:65532, binary EM_X86_64",
	"index linux/arm64, config linux/arm64, entrypoint /kubectl-registry serve, user 65532:65532, binary EM_AARCH64",
}

// TestImageIndex writes the image index as make image-index does and reads the OCI
// layout back: one index, an image per platform, each holding its platform's binary.
func TestImageIndex(t *testing.T) {
	bins := binDir(t)
	out := filepath.Join(t.TempDir(), "image")
	o := indexOptions{BinDir: bins, Platforms: imagePlatforms, Version: "v1.2.3"}
	if err := writeIndex(o, out, io.Discard); err != nil {
		t.Fatal(err)
	}
	idx, err := readIndex(out)
	if err != nil {
		t.Fatal(err)
	}
	if mt, err := idx.MediaType(); err != nil || mt != types.OCIImageIndex {
		t.Errorf("index media type %q (%v), want %s", mt, err, types.OCIImageIndex)
	}
	if diff := cmp.Diff(wantPlatforms, platformsOf(t, idx)); diff != "" {
		t.Errorf("images of the index (-want +got):\n%s", diff)
	}
	if err := checkIndex(idx); err != nil {
		t.Errorf("checkIndex: %v", err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Annotations["org.opencontainers.image.version"]; got != "v1.2.3" {
		t.Errorf("index version annotation %q, want v1.2.3", got)
	}

	// Reproducible: the same binaries give the same digest.
	again, err := buildIndex(o)
	if err != nil {
		t.Fatal(err)
	}
	d1, err1 := idx.Digest()
	d2, err2 := again.Digest()
	if err1 != nil || err2 != nil || d1 != d2 {
		t.Errorf("digests %v (%v) written and %v (%v) built again differ", d1, err1, d2, err2)
	}
}

// TestImageIndexRefusesWrongBinaries: a binary of another machine, a dynamically
// linked one, a missing one or a platform other than linux stops the index.
func TestImageIndexRefusesWrongBinaries(t *testing.T) {
	tests := []struct {
		name      string
		mutate    func(dir string)
		platforms []osArch
		wantErr   string
	}{
		{
			name: "the amd64 binary where the arm64 one goes",
			mutate: func(dir string) {
				writeFile(t, filepath.Join(dir, "linux_arm64", binaryName), fakeELF(elf.EM_X86_64, false))
			},
			wantErr: "linux/arm64",
		},
		{
			name: "a dynamically linked binary",
			mutate: func(dir string) {
				writeFile(t, filepath.Join(dir, "linux_amd64", binaryName), fakeELF(elf.EM_X86_64, true))
			},
			wantErr: "CGO_ENABLED=0",
		},
		{
			name:    "a platform without its binary",
			mutate:  func(dir string) { _ = os.RemoveAll(filepath.Join(dir, "linux_arm64")) },
			wantErr: "linux/arm64",
		},
		{
			name:      "a platform other than linux",
			platforms: []osArch{{"linux", "amd64"}, {"darwin", "arm64"}},
			wantErr:   "linux only",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := binDir(t)
			if tt.mutate != nil {
				tt.mutate(dir)
			}
			platforms := imagePlatforms
			if tt.platforms != nil {
				platforms = tt.platforms
			}
			_, err := buildIndex(indexOptions{BinDir: dir, Platforms: platforms, Version: "v1.2.3"})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("buildIndex: %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// localRegistry serves an in-memory registry on loopback for the test.
func localRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestPushIndex pushes the layout of make image-index to two names of a registry, as
// make image-push does, and pulls each back: the index the registry serves is the one
// written, and a node of either platform gets its own image.
func TestPushIndex(t *testing.T) {
	layoutDir := filepath.Join(t.TempDir(), "image")
	if err := writeIndex(indexOptions{BinDir: binDir(t), Platforms: imagePlatforms, Version: "v1.2.3"}, layoutDir, io.Discard); err != nil {
		t.Fatal(err)
	}
	written, err := readIndex(layoutDir)
	if err != nil {
		t.Fatal(err)
	}
	want, err := written.Digest()
	if err != nil {
		t.Fatal(err)
	}

	host := localRegistry(t)
	images := []string{host + "/team/kubectl-registry:v1.2.3", host + "/team/kubectl-registry:latest"}
	var log bytes.Buffer
	// An empty keychain: the test never reads this machine's docker credentials.
	if err := pushIndex(pushOptions{Layout: layoutDir, Images: images, Insecure: true, Keychain: authn.NewMultiKeychain()}, &log); err != nil {
		t.Fatal(err)
	}
	for _, image := range images {
		if !strings.Contains(log.String(), "pushed "+image+"@"+want.String()) {
			t.Errorf("the push log does not name %s@%s:\n%s", image, want, log.String())
		}
		ref, err := name.ParseReference(image, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := remote.Index(ref)
		if err != nil {
			t.Fatalf("pulling %s: %v", image, err)
		}
		if got, err := idx.Digest(); err != nil || got != want {
			t.Errorf("%s is %v (%v), want the index written %v", image, got, err, want)
		}
		if diff := cmp.Diff(wantPlatforms, platformsOf(t, idx)); diff != "" {
			t.Errorf("images of %s (-want +got):\n%s", image, diff)
		}
		// What a node of each platform pulls.
		for _, arch := range []string{"amd64", "arm64"} {
			img, err := remote.Image(ref, remote.WithPlatform(v1.Platform{OS: "linux", Architecture: arch}))
			if err != nil {
				t.Fatalf("pulling %s for linux/%s: %v", image, arch, err)
			}
			if err := checkImageBinary(img, arch); err != nil {
				t.Errorf("%s for linux/%s: %v", image, arch, err)
			}
		}
	}
}

func TestPushIndexRefuses(t *testing.T) {
	layoutDir := filepath.Join(t.TempDir(), "image")
	if err := writeIndex(indexOptions{BinDir: binDir(t), Platforms: imagePlatforms, Version: "v1.2.3"}, layoutDir, io.Discard); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		o       pushOptions
		wantErr string
	}{
		{name: "no image", o: pushOptions{Layout: layoutDir}, wantErr: "no image to push to"},
		{name: "a digest", o: pushOptions{Layout: layoutDir, Images: []string{"registry.example.com/a/b@sha256:" + strings.Repeat("0", 64)}}, wantErr: "push to a tag"},
		{name: "no tag", o: pushOptions{Layout: layoutDir, Images: []string{"registry.example.com/a/b"}}, wantErr: "<registry>/<repository>:<tag>"},
		{name: "no layout", o: pushOptions{Layout: filepath.Join(t.TempDir(), "none"), Images: []string{"registry.example.com/a/b:v1"}}, wantErr: "OCI layout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.o.Keychain = authn.NewMultiKeychain()
			err := pushIndex(tt.o, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("pushIndex: %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestCheckReleaseImage(t *testing.T) {
	const repo = "ghcr.io/kubectl-registry/kubectl-registry"
	tests := []struct {
		version, image string
		wantErr        bool
	}{
		{version: "v0.2.0", image: repo + ":v0.2.0"},
		{version: "v0.2.0-rc.1", image: repo + ":v0.2.0-rc.1"},
		{version: "v0.2.0", image: repo + ":v0.1.0", wantErr: true},
		{version: "v0.2.0-rc.1", image: repo + ":v0.2.0", wantErr: true},
		{version: "v0.2.0", image: "localhost:5000/kubectl-registry", wantErr: true},
		// Development builds deploy whatever the tree names.
		{version: "v0.1.0-dev+23ac910d6350", image: repo + ":v0.1.0"},
		{version: "v0.1.0-3-g23ac910d6350-dirty", image: repo + ":v0.1.0"},
		{version: "v0.0.0-dev", image: repo + ":v0.1.0"},
	}
	for _, tt := range tests {
		t.Run(tt.version+" "+tt.image, func(t *testing.T) {
			err := checkReleaseImage(tt.version, tt.image)
			if (err != nil) != tt.wantErr {
				t.Errorf("checkReleaseImage(%q, %q) = %v, want error %v", tt.version, tt.image, err, tt.wantErr)
			}
		})
	}
}
