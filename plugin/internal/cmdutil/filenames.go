package cmdutil

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/resource"
	kcmdutil "k8s.io/kubectl/pkg/cmd/util"

	"github.com/kubectl-registry/kubectl-registry/manifests"
)

// AddFilenameFlags adds kubectl's -f, -R and -k (kubectl's cmdutil.AddFilenameOptionFlags)
// to cmd; usage ends "Filename, directory, or URL to files ...".
func AddFilenameFlags(cmd *cobra.Command, o *resource.FilenameOptions, usage string) {
	kcmdutil.AddFilenameOptionFlags(cmd, o, usage)
}

// ValidateFilenames checks -f, -R and -k without I/O: a file or a kustomization, not
// both; no empty name; standard input once.
func ValidateFilenames(o resource.FilenameOptions) []error {
	var errs []error
	switch {
	case len(o.Filenames) == 0 && o.Kustomize == "":
		errs = append(errs, errors.New("no files given: pass -f FILE (\"-f -\" reads standard input) or -k DIR"))
	case len(o.Filenames) > 0 && o.Kustomize != "":
		errs = append(errs, errors.New("only one of -f or -k can be given"))
	case o.Kustomize != "" && o.Recursive:
		errs = append(errs, errors.New("-R goes with -f, not with -k"))
	}
	stdin := 0
	for _, f := range o.Filenames {
		switch f {
		case "":
			errs = append(errs, errors.New("-f: empty file name"))
		case "-":
			stdin++
		}
	}
	if stdin > 1 {
		errs = append(errs, errors.New(`-f -: standard input can be read only once`))
	}
	return errs
}

// ReadObjects decodes every file of -f (kubectl's FilenameOptions, added to a command
// with AddFilenameFlags) in order; in is standard input ("-"): standard input and plain files here, so
// that an error names the document, directories (with -R, recursively) and URLs with
// cli-runtime's resource builder, as kubectl does; or the kustomization of -k.
func ReadObjects(o resource.FilenameOptions, in io.Reader) ([]*unstructured.Unstructured, error) {
	if o.Kustomize != "" {
		return build(resource.FilenameOptions{Kustomize: o.Kustomize}, o.Kustomize)
	}
	var objs []*unstructured.Unstructured
	for _, name := range o.Filenames {
		var data []byte
		var err error
		what := name
		switch {
		case name == "-":
			what = "standard input"
			if in == nil {
				return nil, errors.New("-f -: no standard input")
			}
			data, err = io.ReadAll(in)
		case strings.HasPrefix(name, "http://") || strings.HasPrefix(name, "https://"):
			decoded, err := build(resource.FilenameOptions{Filenames: []string{name}}, name)
			if err != nil {
				return nil, err
			}
			objs = append(objs, decoded...)
			continue
		default:
			var fi os.FileInfo
			if fi, err = os.Stat(name); err == nil && fi.IsDir() {
				decoded, err := build(resource.FilenameOptions{Filenames: []string{name}, Recursive: o.Recursive}, name)
				if err != nil {
					return nil, err
				}
				objs = append(objs, decoded...)
				continue
			}
			if err == nil {
				data, err = os.ReadFile(name)
			}
		}
		if err != nil {
			return nil, &ExitError{Code: ExitCodeError, Err: fmt.Errorf("reading %s: %w", what, err)}
		}
		decoded, err := manifests.Decode(data)
		if err != nil {
			return nil, &ExitError{Code: ExitCodeError, Err: fmt.Errorf("%s: %w", what, err)}
		}
		objs = append(objs, decoded...)
	}
	return objs, nil
}

// build reads the objects of a directory, a URL or a kustomization with cli-runtime's
// resource builder, contacting no API server.
func build(opts resource.FilenameOptions, what string) ([]*unstructured.Unstructured, error) {
	infos, err := resource.NewLocalBuilder().Unstructured().FilenameParam(false, &opts).Flatten().Do().Infos()
	if err != nil {
		return nil, &ExitError{Code: ExitCodeError, Err: fmt.Errorf("reading %s: %w", what, err)}
	}
	objs := make([]*unstructured.Unstructured, 0, len(infos))
	for _, info := range infos {
		u, ok := info.Object.(*unstructured.Unstructured)
		if !ok || u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
			return nil, &ExitError{Code: ExitCodeError, Err: fmt.Errorf("%s: %s: apiVersion, kind and metadata.name are required", what, info.Source)}
		}
		objs = append(objs, u)
	}
	return objs, nil
}
