package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kubectl-registry/kubectl-registry/manifests"
)

// The controller image: the static binary alone on an empty base (no shell, no libc),
// run as the non-root user the Deployment's securityContext names.
const (
	imageBinary = "/" + binaryName
	imageUser   = "65532:65532"
	imageSource = "https://github.com/kubectl-registry/kubectl-registry"
)

// imageEntrypoint is what the container runs: the controller.
var imageEntrypoint = []string{imageBinary, "serve"}

// imageOptions are the inputs of buildImage.
type imageOptions struct {
	// Binary is the static kubectl-registry built for linux/Arch.
	Binary string
	// Arch is the image's architecture (GOARCH).
	Arch string
	// Version labels the image (org.opencontainers.image.version).
	Version string
	// Tag is the image's name in the tarball; empty means manifests.DefaultImage, the image
	// `kubectl registry install` deploys by default.
	Tag string
}

func (o imageOptions) tag() string {
	if o.Tag == "" {
		return manifests.DefaultImage
	}
	return o.Tag
}

// buildImage assembles the controller image: one layer holding the binary at
// /kubectl-registry, OCI media types, a fixed creation time (reproducible).
func buildImage(o imageOptions) (v1.Image, name.Tag, error) {
	tag, err := name.NewTag(o.tag())
	if err != nil {
		return nil, name.Tag{}, fmt.Errorf("image tag: %w", err)
	}
	img, err := assembleImage(o.Binary, o.Arch, o.Version)
	if err != nil {
		return nil, name.Tag{}, err
	}
	return img, tag, nil
}

// assembleImage builds the image of the static linux binary built for arch, after
// checking that it is one (checkBinary): an image whose binary cannot run on its
// platform would be pulled by a node and crash there.
func assembleImage(binary, arch, version string) (v1.Image, error) {
	if err := checkBinary(binary, arch); err != nil {
		return nil, err
	}
	bin, err := os.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("reading the binary: %w", err)
	}
	layerTar, err := singleFileTar(binaryName, 0o755, bin)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("building the layer: %w", err)
	}

	created := v1.Time{Time: archiveTime}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   created,
			CreatedBy: "registry-dist image: COPY kubectl-registry " + imageBinary,
			Comment:   "static kubectl-registry binary",
		},
	})
	if err != nil {
		return nil, fmt.Errorf("adding the layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = arch
	cf.Created = created
	cf.Config = v1.Config{
		Entrypoint: imageEntrypoint,
		User:       imageUser,
		WorkingDir: "/",
		Labels: map[string]string{
			"org.opencontainers.image.title":    binaryName,
			"org.opencontainers.image.source":   imageSource,
			"org.opencontainers.image.version":  version,
			"org.opencontainers.image.licenses": "Apache-2.0",
		},
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("setting the image config: %w", err)
	}
	return img, nil
}

// writeImage builds the image and writes it to o's output as a tarball `docker load`
// reads (it is also what `crane push` takes).
func writeImage(o imageOptions, output string, log io.Writer) error {
	img, tag, err := buildImage(o)
	if err != nil {
		return err
	}
	if err := tarball.WriteToFile(output, tag, img); err != nil {
		return fmt.Errorf("writing %s: %w", output, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "wrote %s: %s (%s, linux/%s)\n", output, tag, digest, o.Arch)
	return nil
}

// singleFileTar returns a tar stream holding one file owned by root.
func singleFileTar(name string, mode int64, data []byte) ([]byte, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     name,
		Mode:     mode,
		Size:     int64(len(data)),
		ModTime:  archiveTime,
		Format:   tar.FormatPAX,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
