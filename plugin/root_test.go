package plugin

import (
	"context"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func execute(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	cmd := NewCmdRegistry(streams)
	cmd.SetArgs(args)
	err = cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr []string
	}{
		{
			name:    "unknown command",
			args:    []string{"nosuchcmd"},
			wantErr: []string{`unknown command "nosuchcmd" for "kubectl registry"`, "See 'kubectl registry --help' for usage."},
		},
		{
			name:    "misspelt command",
			args:    []string{"versoin"},
			wantErr: []string{`did you mean "version"?`},
		},
		{
			name:    "unknown root flag",
			args:    []string{"--nosuchflag"},
			wantErr: []string{"unknown flag: --nosuchflag", "See 'kubectl registry --help' for usage."},
		},
		{
			name:    "unknown subcommand flag",
			args:    []string{"version", "--nosuchflag"},
			wantErr: []string{"unknown flag: --nosuchflag", "See 'kubectl registry version --help' for usage."},
		},
		{
			name:    "unknown shorthand flag",
			args:    []string{"serve", "-X"},
			wantErr: []string{"unknown shorthand flag: 'X'", "See 'kubectl registry serve --help' for usage."},
		},
		{
			name:    "argument to a verb",
			args:    []string{"version", "extra"},
			wantErr: []string{`unexpected argument "extra"`},
		},
		{
			name:    "bad flag value",
			args:    []string{"version", "-o", "bogus"},
			wantErr: []string{`got "bogus"`},
		},
		{
			name:    "invalid cluster name",
			args:    []string{"serve", "--cluster-name", "Foo_Bar"},
			wantErr: []string{`invalid cluster name "Foo_Bar"`, "RFC 1123 label"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, err := execute(t, tt.args...)
			if err == nil {
				t.Fatalf("no error")
			}
			if code := ExitCode(err); code != 2 {
				t.Errorf("ExitCode = %d, want 2 (error %v)", code, err)
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			// main prints the error once; the command prints neither it nor the usage.
			if stdout != "" || stderr != "" {
				t.Errorf("the command printed stdout %q, stderr %q", stdout, stderr)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{nil, []string{"kubectl registry [command]", "serve", "version", "--kubeconfig", "--context"}},
		{[]string{"--help"}, []string{"kubectl registry [command]", `Use "kubectl registry [command] --help"`}},
		{[]string{"help"}, []string{"kubectl registry [command]"}},
		{[]string{"version", "--help"}, []string{"kubectl registry version", "--output"}},
		{[]string{"help", "version"}, []string{"kubectl registry version"}},
		{[]string{"serve", "--help"}, []string{"kubectl registry serve", "--cluster-name", "--leader-elect", "--metrics-bind-address", "--health-probe-bind-address", "--kubeconfig"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			stdout, _, err := execute(t, tt.args...)
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			for _, s := range tt.want {
				if !strings.Contains(stdout, s) {
					t.Errorf("help does not contain %q:\n%s", s, stdout)
				}
			}
			if strings.Contains(stdout, "kubectl-registry [") || strings.Contains(stdout, "kubectl-registry version") {
				t.Errorf("help names the binary instead of %q:\n%s", DisplayName, stdout)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	stdout, _, err := execute(t, "version")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(stdout, "kubectl-registry v") {
		t.Errorf("version output %q", stdout)
	}
}
