package cmdutil

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	kcmdutil "k8s.io/kubectl/pkg/cmd/util"
)

// DryRunStrategy is kubectl's: DryRunNone, DryRunClient or DryRunServer.
type DryRunStrategy = kcmdutil.DryRunStrategy

// The values of --dry-run.
const (
	DryRunNone   = kcmdutil.DryRunNone
	DryRunClient = kcmdutil.DryRunClient
	DryRunServer = kcmdutil.DryRunServer
)

// dryRunNames are the flag values of the strategies.
var dryRunNames = map[DryRunStrategy]string{DryRunNone: "none", DryRunClient: "client", DryRunServer: "server"}

// AddDryRunFlag adds kubectl's --dry-run flag (kubectl's cmdutil.AddDryRunFlag, "none"
// by default) to cmd, with the verb's usage when it is not empty. Unlike kubectl's, the
// flag needs a value, so that "--dry-run server" means --dry-run=server instead of a
// bare --dry-run followed by the argument "server".
func AddDryRunFlag(cmd *cobra.Command, usage string) {
	kcmdutil.AddDryRunFlag(cmd)
	f := cmd.Flags().Lookup("dry-run")
	f.NoOptDefVal = ""
	if usage != "" {
		f.Usage = usage
	}
}

// GetDryRunStrategy parses --dry-run of cmd as kubectl does (kubectl's
// cmdutil.GetDryRunStrategy) and refuses, with a usage error naming them, the values
// that are not one of allowed. An empty --dry-run= is refused too (kubectl would take a
// bare --dry-run as the deprecated --dry-run=client).
func GetDryRunStrategy(cmd *cobra.Command, allowed ...DryRunStrategy) (DryRunStrategy, error) {
	names := make([]string, len(allowed))
	for i, s := range allowed {
		names[i] = fmt.Sprintf("%q", dryRunNames[s])
	}
	want := strings.Join(names, ", ")
	if len(names) > 1 {
		want = strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	}
	f := cmd.Flags().Lookup("dry-run")
	if f == nil {
		return DryRunNone, nil
	}
	if f.Value.String() == "" {
		return DryRunNone, UsageErrorf(cmd, "--dry-run must be %s: a value must be set, as in --dry-run=%s", want, dryRunNames[allowed[len(allowed)-1]])
	}
	s, err := kcmdutil.GetDryRunStrategy(cmd)
	if err != nil || !slices.Contains(allowed, s) || f.Value.String() != dryRunNames[s] {
		// kubectl also takes true and false, which are not documented values.
		return DryRunNone, UsageErrorf(cmd, "--dry-run must be %s, got %q", want, f.Value.String())
	}
	return s, nil
}
