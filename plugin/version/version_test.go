package version

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
	"github.com/kubectl-registry/kubectl-registry/reconciler/buildinfo"
)

var testInfo = buildinfo.Info{
	Version:   "v1.2.3",
	Commit:    "0123abc",
	BuildDate: "2026-01-02T03:04:05Z",
	GoVersion: "go1.26.8",
	Platform:  "linux/amd64",
}

func TestRun(t *testing.T) {
	tests := []struct {
		output  string
		want    string
		wantErr string
	}{
		{
			output: "",
			want:   "kubectl-registry v1.2.3 (commit 0123abc, built 2026-01-02T03:04:05Z, go1.26.8, linux/amd64)\n",
		},
		{
			output: "json",
			want: `{
  "version": "v1.2.3",
  "commit": "0123abc",
  "buildDate": "2026-01-02T03:04:05Z",
  "goVersion": "go1.26.8",
  "platform": "linux/amd64"
}
`,
		},
		{
			output: "yaml",
			want: `buildDate: "2026-01-02T03:04:05Z"
commit: 0123abc
goVersion: go1.26.8
platform: linux/amd64
version: v1.2.3
`,
		},
		{
			output:  "wide",
			wantErr: `--output must be one of (json, yaml), got "wide"`,
		},
	}
	for _, tt := range tests {
		t.Run("output="+tt.output, func(t *testing.T) {
			streams, _, out, errOut := genericiooptions.NewTestIOStreams()
			o := NewOptions(nil, streams)
			o.Output = tt.output
			o.Info = testInfo
			err := o.Validate()
			if err == nil {
				err = o.Run(context.Background())
			}
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("got error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if diff := cmp.Diff(tt.want, out.String()); diff != "" {
				t.Errorf("output mismatch (-want +got):\n%s", diff)
			}
			if errOut.Len() != 0 {
				t.Errorf("unexpected stderr: %q", errOut.String())
			}
		})
	}
}

func TestCommand(t *testing.T) {
	info := buildinfo.Get()
	tests := []struct {
		name     string
		args     []string
		want     string
		wantCode int
		wantErr  []string
	}{
		{
			name: "one line",
			args: nil,
			want: "kubectl-registry " + info.String() + "\n",
		},
		{
			name: "json",
			args: []string{"-o", "json"},
			want: "{\n  \"version\": \"" + info.Version + "\",\n",
		},
		{
			name: "yaml",
			args: []string{"--output=yaml"},
			want: "buildDate: ",
		},
		{
			name:     "bad output",
			args:     []string{"-o", "bogus"},
			wantCode: 2,
			wantErr:  []string{`got "bogus"`, "json, yaml", "See 'version --help' for usage."},
		},
		{
			name:     "argument",
			args:     []string{"extra"},
			wantCode: 2,
			wantErr:  []string{`unexpected argument "extra"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			streams, _, out, _ := genericiooptions.NewTestIOStreams()
			cmd := NewCmdVersion(nil, streams)
			cmd.SilenceErrors, cmd.SilenceUsage = true, true
			cmd.SetArgs(tt.args)
			err := cmd.ExecuteContext(context.Background())
			if got := cmdutil.ExitCode(err); got != tt.wantCode {
				t.Fatalf("exit code %d (error %v), want %d", got, err, tt.wantCode)
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			if tt.wantCode == 0 && !strings.HasPrefix(out.String(), tt.want) {
				t.Errorf("output %q does not start with %q", out.String(), tt.want)
			}
		})
	}
}
