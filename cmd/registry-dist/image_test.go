package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kubectl-registry/kubectl-registry/manifests"
)

// TestImageTagIsTheDefaultImage: the image `make image` writes is the one
// `kubectl registry install` deploys by default (its --image and the Deployment).
func TestImageTagIsTheDefaultImage(t *testing.T) {
	if got := (imageOptions{}).tag(); got != manifests.DefaultImage {
		t.Errorf("image tag %q, manifests.DefaultImage %q", got, manifests.DefaultImage)
	}
}

// TestImageTarball writes the image as `make image` does and reads the tarball back: the
// tag, the config (entrypoint, non-root user) and a single layer holding only the binary.
func TestImageTarball(t *testing.T) {
	dir := t.TempDir()
	binary := filepath.Join(dir, "kubectl-registry")
	content := fakeELF(elf.EM_X86_64, false)
	if err := os.WriteFile(binary, content, 0o755); err != nil {
		t.Fatal(err)
	}
	output := filepath.Join(dir, "image.tar")
	var log bytes.Buffer
	if err := writeImage(imageOptions{Binary: binary, Arch: "amd64", Version: "v1.2.3"}, output, &log); err != nil {
		t.Fatal(err)
	}

	// docker load reads manifest.json; its RepoTags name the image.
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(output) })
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 || !cmp.Equal(m[0].RepoTags, []string{manifests.DefaultImage}) {
		t.Errorf("manifest.json %+v, want one image tagged %s", m, manifests.DefaultImage)
	}

	tag, err := name.NewTag(manifests.DefaultImage)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(output, &tag)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("platform %s/%s, want linux/amd64", cf.OS, cf.Architecture)
	}
	if diff := cmp.Diff([]string{"/kubectl-registry", "serve"}, cf.Config.Entrypoint); diff != "" {
		t.Errorf("entrypoint (-want +got):\n%s", diff)
	}
	if len(cf.Config.Cmd) != 0 {
		t.Errorf("cmd %q, want none", cf.Config.Cmd)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532 (the Deployment's runAsUser/runAsGroup)", cf.Config.User)
	}
	if got := cf.Config.Labels["org.opencontainers.image.version"]; got != "v1.2.3" {
		t.Errorf("version label %q", got)
	}

	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1 (an empty base and the binary)", len(layers))
	}
	if len(cf.RootFS.DiffIDs) != 1 || len(cf.History) != 1 {
		t.Errorf("rootfs %d diff IDs, %d history entries, want 1 each", len(cf.RootFS.DiffIDs), len(cf.History))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	type file struct {
		Name     string
		Mode     int64
		UID, GID int
		Data     string
	}
	var files []file
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, file{hdr.Name, hdr.Mode, hdr.Uid, hdr.Gid, string(data)})
	}
	// Nothing but the binary: no shell, no package manager, no libc.
	want := []file{{Name: "kubectl-registry", Mode: 0o755, Data: string(content)}}
	if diff := cmp.Diff(want, files); diff != "" {
		t.Errorf("layer files (-want +got):\n%s", diff)
	}

	// Built in memory the image has OCI media types (what `crane push` of it publishes; the
	// docker tarball format does not record them). Building again gives the same digest, and
	// the tarball holds that image's config.
	built, _, err := buildImage(imageOptions{Binary: binary, Arch: "amd64", Version: "v1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	if mt, err := built.MediaType(); err != nil || mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %q (%v), want OCI", mt, err)
	}
	again, _, err := buildImage(imageOptions{Binary: binary, Arch: "amd64", Version: "v1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	d1, err1 := built.Digest()
	d2, err2 := again.Digest()
	if err1 != nil || err2 != nil || d1 != d2 {
		t.Errorf("digests %v (%v) and %v (%v) differ", d1, err1, d2, err2)
	}
	c1, err1 := built.ConfigName()
	c2, err2 := img.ConfigName()
	if err1 != nil || err2 != nil || c1 != c2 {
		t.Errorf("config digests %v (%v) built and %v (%v) in the tarball differ", c1, err1, c2, err2)
	}
}

func TestImageRejectsABadTag(t *testing.T) {
	dir := t.TempDir()
	binary := filepath.Join(dir, "kubectl-registry")
	if err := os.WriteFile(binary, []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := writeImage(imageOptions{Binary: binary, Arch: "amd64", Tag: "Not A Tag"}, filepath.Join(dir, "i.tar"), io.Discard)
	if err == nil {
		t.Error("writeImage with tag \"Not A Tag\" succeeded")
	}
}
