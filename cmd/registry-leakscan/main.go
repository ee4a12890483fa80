// Command registry-leakscan checks the captured output of the test suite for credentials
// and Secret data: nothing the tests print (logs, events, CLI output, errors) may hold one.
//
//	go test -json ./... > bin/test-output.json
//	registry-leakscan bin/test-output.json     # or: ... | registry-leakscan (stdin)
//
// It reads `go test -json` output (it joins the Output fragments test2json splits long
// lines into) or plain text, and reports, as file:line, the test that printed it and an
// excerpt in which the secret itself is redacted:
//
//   - a JWT such as a ServiceAccount token: three base64url segments, the first starting
//     with "eyJ", at least 100 characters;
//   - a PEM private key ("-----BEGIN ... PRIVATE KEY-----"); certificates, public keys
//     and CA bundles are public and allowed;
//   - the Secret canary (package canary): the marker tests plant in Secret data;
//   - any of these base64-encoded (a Secret's data, a kubeconfig's client-key-data), up to
//     three encodings deep, or printed by Go as a byte slice ([45 45 45 ...]).
//
// It also reports controller-runtime's "log.SetLogger(...) was never called" warning: a
// test binary that builds controller-runtime clients, managers or envtest must set a
// logger (testbed.Main does), or its output fills with that warning's stack trace.
//
// It exits with 0 when it found nothing, 1 when it found a leak and 2 on a usage or read
// error.
//
// With -progress it instead reads `go test -json` from stdin and prints what plain
// `go test` would: package results, and the output of failing tests; `make test` pipes
// the suite through it while saving the JSON for the scan.
package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/kubectl-registry/kubectl-registry/cmd/registry-leakscan/canary"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

const usage = `usage: registry-leakscan [FILE...]   scan go test (-json) output; "-" or no FILE reads stdin
       registry-leakscan -progress     print go test -json from stdin like go test does`

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("registry-leakscan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, usage) }
	progressMode := fs.Bool("progress", false, "print go test -json from stdin as go test would, instead of scanning")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *progressMode {
		if fs.NArg() > 0 {
			fmt.Fprintln(stderr, usage)
			return 2
		}
		if err := progress(stdin, stdout); err != nil {
			fmt.Fprintln(stderr, "registry-leakscan:", err)
			return 2
		}
		return 0
	}
	files := fs.Args()
	if len(files) == 0 {
		files = []string{"-"}
	}
	s := newScanner()
	var findings []Finding
	for _, name := range files {
		var (
			r   io.Reader = stdin
			err error
		)
		if name == "-" {
			name = "<stdin>"
		} else {
			var f *os.File
			if f, err = os.Open(name); err != nil {
				fmt.Fprintln(stderr, "registry-leakscan:", err)
				return 2
			}
			r = f
			defer func() { _ = f.Close() }() // read only: a failed close loses nothing
		}
		found, err := s.scanFile(name, r)
		if err != nil {
			fmt.Fprintf(stderr, "registry-leakscan: reading %s: %v\n", name, err)
			return 2
		}
		findings = append(findings, found...)
	}
	for _, f := range findings {
		fmt.Fprintln(stdout, f)
	}
	if len(findings) > 0 {
		fmt.Fprintf(stderr, "registry-leakscan: %d leak(s) of credentials or Secret data, or unset loggers, in the output of %s\n", len(findings), strings.Join(files, ", "))
		return 1
	}
	return 0
}

// Finding is one leak.
type Finding struct {
	File string
	Line int
	// Where names the package and test that printed it (go test -json input only).
	Where string
	// Kind says what leaked, e.g. "JWT-like token" or "base64 of a PEM private key".
	Kind string
	// Excerpt is the line around the leak with every leak in it redacted.
	Excerpt string
}

func (f Finding) String() string {
	where := ""
	if f.Where != "" {
		where = " " + f.Where + ":"
	}
	return fmt.Sprintf("%s:%d:%s %s: %s", f.File, f.Line, where, f.Kind, f.Excerpt)
}

// minTokenLen is the length from which three base64url segments starting with "eyJ" are
// taken for a token (ServiceAccount tokens are about 900 characters).
const minTokenLen = 100

// loggerUnsetWarning is what controller-runtime prints, with a stack trace, when a
// process used its logger without ever calling log.SetLogger.
const loggerUnsetWarning = "log.SetLogger(...) was never called"

// maxDepth bounds the base64 encodings looked through.
const maxDepth = 3

var (
	jwtRE    = regexp.MustCompile(`eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`)
	pemKeyRE = regexp.MustCompile(`-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----`)
	// base64RE is a run of base64 (standard or URL alphabet) long enough to hide a
	// private key marker, a token or the canary.
	base64RE = regexp.MustCompile(`[A-Za-z0-9+/_-]{24,}={0,2}`)
	// byteSliceRE is a []byte as fmt's %v prints it.
	byteSliceRE = regexp.MustCompile(`\[(?:[0-9]{1,3} ){15,}[0-9]{1,3}\]`)
)

// span is a leak at text[start:end].
type span struct {
	start, end int
	kind       string
}

type scanner struct {
	// canaryB64 are the parts of the canary's base64 encodings that do not depend on
	// what surrounds it, for each alignment and alphabet.
	canaryB64 []string
}

func newScanner() *scanner {
	s := &scanner{}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		for pad := range 3 {
			full := enc.EncodeToString(append(make([]byte, pad), canary.Value...))
			// Drop the quantum holding the padding bytes, and the last one, which
			// depends on what follows.
			first := 0
			if pad > 0 {
				first = 4
			}
			last := (pad + len(canary.Value)) / 3 * 4
			s.canaryB64 = append(s.canaryB64, full[first:last])
		}
	}
	slices.Sort(s.canaryB64)
	s.canaryB64 = slices.Compact(s.canaryB64)
	return s
}

// find returns the leaks in text, looking through base64 down to depth maxDepth. prefix
// says how text was found ("base64 of ", ...).
func (s *scanner) find(text string, depth int, prefix string) []span {
	var spans []span
	for _, m := range jwtRE.FindAllStringIndex(text, -1) {
		if m[1]-m[0] >= minTokenLen {
			spans = append(spans, span{m[0], m[1], prefix + "JWT-like token"})
		}
	}
	for _, m := range pemKeyRE.FindAllStringIndex(text, -1) {
		spans = append(spans, span{m[0], m[1], prefix + "PEM private key"})
	}
	for i := 0; ; {
		j := strings.Index(text[i:], canary.Value)
		if j < 0 {
			break
		}
		spans = append(spans, span{i + j, i + j + len(canary.Value), prefix + "Secret canary"})
		i += j + len(canary.Value)
	}
	if depth >= maxDepth {
		return spans
	}
	for _, m := range base64RE.FindAllStringIndex(text, -1) {
		if covered(spans, m[0], m[1]) {
			continue
		}
		run := text[m[0]:m[1]]
		if kind := s.canaryInBase64(run); kind != "" {
			spans = append(spans, span{m[0], m[1], prefix + "base64 of " + kind})
			continue
		}
		if decoded, ok := decodeBase64(run); ok {
			if found := s.find(string(decoded), depth+1, prefix+"base64 of "); len(found) > 0 {
				spans = append(spans, span{m[0], m[1], found[0].kind})
			}
		}
	}
	for _, m := range byteSliceRE.FindAllStringIndex(text, -1) {
		if covered(spans, m[0], m[1]) {
			continue
		}
		if found := s.find(string(parseByteSlice(text[m[0]:m[1]])), depth+1, prefix+"byte slice of "); len(found) > 0 {
			spans = append(spans, span{m[0], m[1], found[0].kind})
		}
	}
	return spans
}

func (s *scanner) canaryInBase64(run string) string {
	for _, c := range s.canaryB64 {
		if strings.Contains(run, c) {
			return "Secret canary"
		}
	}
	return ""
}

func covered(spans []span, start, end int) bool {
	for _, sp := range spans {
		if start < sp.end && sp.start < end {
			return true
		}
	}
	return false
}

// decodeBase64 decodes a run of standard or URL base64, with or without padding; a
// trailing character that cannot end an encoding is dropped.
func decodeBase64(run string) ([]byte, bool) {
	run = strings.TrimRight(run, "=")
	std, url := strings.ContainsAny(run, "+/"), strings.ContainsAny(run, "-_")
	if std && url {
		return nil, false
	}
	enc := base64.RawStdEncoding
	if url {
		enc = base64.RawURLEncoding
	}
	if len(run)%4 == 1 {
		run = run[:len(run)-1]
	}
	b, err := enc.DecodeString(run)
	return b, err == nil
}

func parseByteSlice(s string) []byte {
	var b []byte
	for f := range strings.FieldsSeq(strings.Trim(s, "[]")) {
		n, err := strconv.Atoi(f)
		if err != nil || n > 255 {
			return nil
		}
		b = append(b, byte(n))
	}
	return b
}

// excerptContext is how much of the line around a leak a finding shows.
const excerptContext = 60

// redact returns text around the first span, with every span replaced by a note that
// gives the secret's length and a short hash (to tell leaks apart), never the secret.
func redact(text string, spans []span) string {
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	var b strings.Builder
	pos := 0
	first, firstEnd := -1, -1
	for _, sp := range spans {
		if sp.start < pos { // overlaps the previous one
			sp.start = pos
			if sp.end <= pos {
				continue
			}
		}
		b.WriteString(text[pos:sp.start])
		if first < 0 {
			first = b.Len()
		}
		sum := sha256.Sum256([]byte(text[sp.start:sp.end]))
		fmt.Fprintf(&b, "[REDACTED %d chars, sha256 %x]", sp.end-sp.start, sum[:4])
		if firstEnd < 0 {
			firstEnd = b.Len()
		}
		pos = sp.end
	}
	b.WriteString(text[pos:])
	out := b.String()
	start := max(first-excerptContext, 0)
	end := min(firstEnd+excerptContext, len(out))
	excerpt := strings.TrimSpace(out[start:end])
	excerpt = strconv.Quote(excerpt)
	excerpt = strings.ReplaceAll(excerpt[1:len(excerpt)-1], `\"`, `"`)
	if start > 0 {
		excerpt = "…" + excerpt
	}
	if end < len(out) {
		excerpt += "…"
	}
	return excerpt
}

// event is the part of a go test -json event the scanner reads.
type event struct {
	Action     string
	Package    string
	ImportPath string
	Test       string
	Output     *string
}

// pendingLine is an output line of a package that test2json split into fragments.
type pendingLine struct {
	text strings.Builder
	line int
	test string
}

// scanFile scans one go test -json or plain text stream.
func (s *scanner) scanFile(name string, r io.Reader) ([]Finding, error) {
	var findings []Finding
	check := func(text string, line int, where string) {
		if strings.Contains(text, loggerUnsetWarning) {
			findings = append(findings, Finding{File: name, Line: line, Where: where, Kind: "controller-runtime logger never set", Excerpt: strings.TrimSpace(text)})
		}
		spans := s.find(text, 0, "")
		if len(spans) == 0 {
			return
		}
		findings = append(findings, Finding{File: name, Line: line, Where: where, Kind: spans[0].kind, Excerpt: redact(text, spans)})
	}
	pending := map[string]*pendingLine{}
	var order []string // packages with a pending line, in order of appearance
	flush := func(pkg string) {
		p := pending[pkg]
		if p == nil {
			return
		}
		delete(pending, pkg)
		check(p.text.String(), p.line, strings.TrimSpace(pkg+" "+p.test))
	}
	br := bufio.NewReaderSize(r, 1<<20)
	for lineNo := 1; ; lineNo++ {
		raw, err := br.ReadBytes('\n')
		if len(raw) > 0 {
			var ev event
			if bytes.HasPrefix(raw, []byte("{")) && json.Unmarshal(raw, &ev) == nil && ev.Action != "" {
				if ev.Output != nil {
					pkg := ev.Package
					if pkg == "" {
						pkg = ev.ImportPath
					}
					p := pending[pkg]
					if p == nil {
						p = &pendingLine{line: lineNo, test: ev.Test}
						pending[pkg] = p
						order = append(order, pkg)
					}
					p.text.WriteString(*ev.Output)
					if strings.HasSuffix(*ev.Output, "\n") {
						flush(pkg)
					}
				}
			} else {
				check(string(raw), lineNo, "")
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return findings, err
		}
	}
	for _, pkg := range order {
		flush(pkg)
	}
	return findings, nil
}

// progress prints go test -json from r as go test without -v would: the package
// results, build errors, and the whole output of every test that fails.
func progress(r io.Reader, w io.Writer) error {
	type key struct{ pkg, test string }
	buffered := map[key][]string{}
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		raw, err := br.ReadBytes('\n')
		if len(raw) > 0 {
			var ev event
			if !bytes.HasPrefix(raw, []byte("{")) || json.Unmarshal(raw, &ev) != nil || ev.Action == "" {
				// Not an event (go test's own errors): show it as it is.
				if _, err := w.Write(raw); err != nil {
					return err
				}
			} else {
				pkg := ev.Package
				if pkg == "" {
					pkg = ev.ImportPath
				}
				k := key{pkg, ev.Test}
				switch {
				case ev.Output != nil && ev.Test == "":
					if *ev.Output != "PASS\n" && !strings.HasPrefix(*ev.Output, "=== ") {
						if _, err := io.WriteString(w, *ev.Output); err != nil {
							return err
						}
					}
				case ev.Output != nil:
					buffered[k] = append(buffered[k], *ev.Output)
				case ev.Action == "fail" && ev.Test != "":
					if _, err := io.WriteString(w, strings.Join(buffered[k], "")); err != nil {
						return err
					}
					delete(buffered, k)
				case ev.Action == "pass" || ev.Action == "skip":
					delete(buffered, k)
				case ev.Action == "fail":
					// The package failed (a panic or a timeout): show what its
					// unfinished tests printed.
					for bk, out := range buffered {
						if bk.pkg == pkg {
							if _, err := io.WriteString(w, strings.Join(out, "")); err != nil {
								return err
							}
							delete(buffered, bk)
						}
					}
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
