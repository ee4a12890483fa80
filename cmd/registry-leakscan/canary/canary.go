// Package canary holds the marker that tests plant in Secret data to prove it never leaks:
// cmd/registry-leakscan fails when the captured output of the test suite holds Value, in
// plain text or base64 (at any depth of base64 nesting up to three, e.g. inside a
// kubeconfig inside a Secret).
//
// Use it as, or as the prefix of, the value of a Secret key that a test syncs, diffs or
// shows, wherever the data must stay masked:
//
//	secret.StringData = map[string]string{"password": canary.Value + "-db"}
//
// Do not use it where a test shows Secret data on purpose (sync-diff --show-secrets, a
// test that reads the Secret back and compares it with t.Errorf on mismatch is fine only
// as long as it passes), and never log it yourself.
package canary

// Value is the canary. It is unlikely to occur by chance and safe to put in any Secret.
const Value = "registry-leakscan-canary-7f3c9a1e"
