package cmdutil

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestGetDryRunStrategy(t *testing.T) {
	all := []DryRunStrategy{DryRunNone, DryRunClient, DryRunServer}
	tests := []struct {
		name    string
		args    []string
		allowed []DryRunStrategy
		want    DryRunStrategy
		wantErr string
	}{
		{name: "default", allowed: all, want: DryRunNone},
		{name: "client", args: []string{"--dry-run=client"}, allowed: all, want: DryRunClient},
		{name: "server", args: []string{"--dry-run=server"}, allowed: all, want: DryRunServer},
		{name: "none", args: []string{"--dry-run=none"}, allowed: all, want: DryRunNone},
		{name: "bogus", args: []string{"--dry-run=bogus"}, allowed: all, wantErr: `--dry-run must be "none", "client" or "server", got "bogus"`},
		{name: "bool", args: []string{"--dry-run=true"}, allowed: all, wantErr: `got "true"`},
		{name: "empty", args: []string{"--dry-run="}, allowed: all, wantErr: `--dry-run must be "none", "client" or "server": a value must be set, as in --dry-run=server`},
		{name: "separate value", args: []string{"--dry-run", "server"}, allowed: all, want: DryRunServer},
		{name: "not allowed", args: []string{"--dry-run=client"}, allowed: []DryRunStrategy{DryRunNone, DryRunServer}, wantErr: `--dry-run must be "none" or "server", got "client"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := &cobra.Command{Use: "verb", RunE: func(*cobra.Command, []string) error { return nil }}
			AddDryRunFlag(cmd, "usage")
			if err := cmd.ParseFlags(tt.args); err != nil {
				t.Fatal(err)
			}
			if args := cmd.Flags().Args(); len(args) > 0 {
				t.Fatalf("arguments left: %q", args)
			}
			got, err := GetDryRunStrategy(cmd, tt.allowed...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if ExitCode(err) != ExitCodeError {
					t.Errorf("exit code %d", ExitCode(err))
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("GetDryRunStrategy = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
	cmd := &cobra.Command{}
	AddDryRunFlag(cmd, "mine")
	if u := cmd.Flags().Lookup("dry-run").Usage; u != "mine" {
		t.Errorf("usage %q", u)
	}
	if err := cmd.ParseFlags([]string{"--dry-run"}); err == nil || !strings.Contains(err.Error(), "flag needs an argument") {
		t.Errorf("a bare --dry-run: %v", err)
	}
}
