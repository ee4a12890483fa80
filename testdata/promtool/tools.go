//go:build tools

// Package promtool pins the Prometheus version whose promtool `make testbin` builds into
// bin/testbin (promtool check rules / test rules on manifests/monitoring). A module of its
// own, so Prometheus's dependencies never reach the binary's go.mod.
package promtool

import _ "github.com/prometheus/prometheus/cmd/promtool"
