package peers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// A member's admin controls its API server, so every byte it answers is hostile input:
// one response or one object could be as large as the peer likes, and the decoders of
// client-go read a response whole (a list) or a watch event whole (its JSON framer reads
// the whole frame before the decoder sees it). Every HTTP client of a peer reads through
// LimitTransport, which cuts a response at a byte limit while it is read, before any
// decoder buffers it: a response (a list, a single object, discovery) at
// Limits.MaxResponseBytes; within it, one element of a JSON list (or one field of an
// object) at Limits.MaxObjectBytes; one event of a watch stream (JSON or protobuf) at
// Limits.MaxObjectBytes, a stream having no limit of its own. Reading past a limit fails
// with a *TooLargeError, the connection is closed without reading the rest, and nothing
// larger than the limit is ever held.

// Default limits.
const (
	// DefaultMaxResponseBytes bounds one response of a peer's API server: a list is
	// paged (the engine's pages hold at most 500 objects), so 64 MiB is far above a list
	// of honest objects, and well under the Deployment's 256 MiB memory limit.
	DefaultMaxResponseBytes = 64 << 20
	// DefaultMaxObjectBytes bounds one object (a watch event, an element of a list): an
	// API server stores objects of at most about 1.5 MiB in etcd, so twice that with room
	// for the event's envelope is more than any honest object.
	DefaultMaxObjectBytes = 3 << 20
	// DefaultMaxMembershipObjects bounds the Clusters, and the Secrets of the registry
	// namespace, one peer's membership cache holds.
	DefaultMaxMembershipObjects = 1000
)

// Limits are the byte limits on what a peer answers.
type Limits struct {
	// MaxResponseBytes bounds one response (not a watch stream); 0 means the default.
	MaxResponseBytes int64
	// MaxObjectBytes bounds one event of a watch stream and one element of a list; 0
	// means the default.
	MaxObjectBytes int64
	// MaxListItems bounds the items of one JSON list answered to a request without a
	// refusal hook of its own (the membership cache's: the engine counts its own); 0
	// means none. They are counted as they are read, before any is decoded.
	MaxListItems int
}

func (l Limits) withDefaults() Limits {
	if l.MaxResponseBytes <= 0 {
		l.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if l.MaxObjectBytes <= 0 {
		l.MaxObjectBytes = DefaultMaxObjectBytes
	}
	return l
}

// What a TooLargeError refused.
const (
	// TooLargeResponse: a whole response was over MaxResponseBytes.
	TooLargeResponse = "response"
	// TooLargeObject: one object (a watch event, an element of a list) was over
	// MaxObjectBytes.
	TooLargeObject = "object"
	// TooManyItems: a list held more than MaxListItems items.
	TooManyItems = "items"
)

// TooLargeError says that a peer answered more bytes than a limit: the read stopped
// there.
type TooLargeError struct {
	// What was refused: TooLargeResponse or TooLargeObject.
	What string
	// Limit is the limit in bytes; Read how many bytes of the response had been read
	// when it was refused.
	Limit, Read int64
	// Path is the path of the request (this cluster's own, not the peer's words).
	Path string
}

func (e *TooLargeError) Error() string {
	if e.What == TooManyItems {
		return fmt.Sprintf("the peer answered %s with a list of more than %d items (the cap, --max-peer-membership-objects on this cluster): refused after %d bytes", e.Path, e.Limit, e.Read)
	}
	if e.What == TooLargeObject {
		return fmt.Sprintf("the peer answered %s with an object larger than %s (the limit on one object, --max-peer-object-bytes on this cluster): refused after %d bytes", e.Path, formatBytes(e.Limit), e.Read)
	}
	return fmt.Sprintf("the peer answered %s with a response larger than %s (the limit on one response, --max-peer-response-bytes on this cluster): refused after %d bytes", e.Path, formatBytes(e.Limit), e.Read)
}

// formatBytes writes n bytes in MiB or KiB when it is a whole number of them.
func formatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// IsTooLarge reports whether err is or wraps a *TooLargeError, or carries its message
// (a watch's decoding error reaches the informer as a Status with the message only).
func IsTooLarge(err error) bool {
	var tl *TooLargeError
	return err != nil && (errors.As(err, &tl) || strings.Contains(err.Error(), "--max-peer-object-bytes on this cluster") ||
		strings.Contains(err.Error(), "--max-peer-membership-objects on this cluster") ||
		strings.Contains(err.Error(), "--max-peer-response-bytes on this cluster"))
}

type refusalKey struct{}

// WithRefusalHook returns a context whose requests through a LimitTransport call hook
// when a limit refuses their response (once per response). A request without one calls
// the transport's own hook.
func WithRefusalHook(ctx context.Context, hook func(*TooLargeError)) context.Context {
	return context.WithValue(ctx, refusalKey{}, hook)
}

// LimitTransport wraps a peer's transport: every response body is read through the
// limits (see above).
type LimitTransport struct {
	Base   http.RoundTripper
	Limits Limits
	// OnRefused, if set, is called when a response is refused and its request's context
	// has no hook of its own (WithRefusalHook).
	OnRefused func(*TooLargeError)
}

// RoundTrip sends req through Base and wraps the response body.
func (t *LimitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.Base.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	l := t.Limits.withDefaults()
	hook, _ := req.Context().Value(refusalKey{}).(func(*TooLargeError))
	if hook == nil {
		hook = t.OnRefused
	} else {
		l.MaxListItems = 0 // the engine counts its objects itself
	}
	resp.Body = newLimitedBody(resp.Body, req.URL.Path, isWatch(req), resp.Header.Get("Content-Type"), l, hook)
	return resp, nil
}

// isWatch reports whether req asks for a watch stream.
func isWatch(req *http.Request) bool {
	q := req.URL.Query().Get("watch")
	return q == "true" || q == "1" || strings.Contains(req.URL.Path, "/watch/")
}

// Limited wraps an HTTP client's transport in a LimitTransport (a new client; c is not
// changed).
func Limited(c *http.Client, l Limits, onRefused func(*TooLargeError)) *http.Client {
	out := *c
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	out.Transport = &LimitTransport{Base: base, Limits: l, OnRefused: onRefused}
	return &out
}

// limitedBody is a response body read through the limits.
type limitedBody struct {
	rc   io.ReadCloser
	path string
	// total bounds the whole body (0: none, a watch stream).
	total int64
	read  int64
	// json scans JSON for the size of one element (a list) or one frame (a watch); proto
	// reads the length prefixes of a protobuf watch stream. At most one is set.
	json  *jsonScanner
	proto *protoFrames
	hook  func(*TooLargeError)
	once  sync.Once
	err   error
}

func newLimitedBody(rc io.ReadCloser, path string, watch bool, contentType string, l Limits, hook func(*TooLargeError)) *limitedBody {
	b := &limitedBody{rc: rc, path: path, hook: hook}
	proto := strings.Contains(contentType, "protobuf")
	switch {
	case watch && proto:
		b.proto = &protoFrames{limit: l.MaxObjectBytes}
	case watch:
		// One top-level value is one event.
		b.json = &jsonScanner{level: 0, limit: l.MaxObjectBytes}
	case proto:
		b.total = l.MaxResponseBytes
	default:
		b.total = l.MaxResponseBytes
		// The elements of a list's items (and the fields of an object's maps) sit at
		// depth 2.
		b.json = &jsonScanner{level: 2, limit: l.MaxObjectBytes, maxItems: l.MaxListItems}
	}
	return b
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.total > 0 && int64(len(p)) > b.total-b.read+1 {
		// Never read more than one byte past the limit.
		p = p[:b.total-b.read+1]
	}
	n, err := b.rc.Read(p)
	if b.total > 0 && b.read+int64(n) > b.total {
		return b.refuse(p, n, TooLargeResponse, b.total, b.total-b.read)
	}
	if b.json != nil {
		if i := b.json.scan(p[:n]); i >= 0 {
			if b.json.items > b.json.maxItems && b.json.maxItems > 0 {
				return b.refuse(p, n, TooManyItems, int64(b.json.maxItems), int64(i))
			}
			return b.refuse(p, n, TooLargeObject, b.json.limit, int64(i))
		}
	}
	if b.proto != nil {
		if i := b.proto.scan(p[:n]); i >= 0 {
			return b.refuse(p, n, TooLargeObject, b.proto.limit, int64(i))
		}
	}
	b.read += int64(n)
	return n, err
}

// refuse fails the body: of the n bytes read into p, the first keep are passed on.
func (b *limitedBody) refuse(p []byte, n int, what string, limit, keep int64) (int, error) {
	keep = max(0, min(keep, int64(n)))
	b.read += keep
	b.err = &TooLargeError{What: what, Limit: limit, Read: b.read + int64(n) - keep, Path: b.path}
	b.once.Do(func() {
		if b.hook != nil {
			b.hook(b.err.(*TooLargeError))
		}
	})
	// The rest is never read: closing an unread body closes the connection.
	_ = b.rc.Close()
	return int(keep), b.err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// jsonScanner follows the nesting of a JSON stream and counts the bytes of each value at
// depth level (0: each top-level value, as in a watch stream; 2: each element of a
// top-level object's arrays and objects, as a list's items), from where the last one
// ended; whitespace and separators count to the next one.
type jsonScanner struct {
	level int
	limit int64

	depth  int
	inStr  bool
	escape bool
	n      int64

	// maxItems bounds the elements of the array under the top-level key "items" (a
	// list's items; 0: none), counted in items. key holds the first bytes of the last
	// string read at depth 1 (a key, before its array opens); inItems is set inside that
	// array, and expect when an element may start there.
	maxItems int
	items    int
	key      [8]byte
	keyLen   int
	inItems  bool
	expect   bool
}

// scan reads b, returning the index in b at which a value went over the limit, or -1.
func (s *jsonScanner) scan(b []byte) int {
	for i := 0; i < len(b); i++ {
		if s.inStr && s.depth != 1 {
			// Most of an object is strings: skip to the end of this one at once.
			start := i
			i = s.skipString(b, i)
			if s.depth >= s.level {
				before := s.n
				if s.n += int64(i - start); s.n > s.limit {
					return start + int(s.limit-before)
				}
			}
			if i >= len(b) {
				return -1
			}
		}
		c := b[i]
		if s.depth >= s.level {
			s.n++
			if s.n > s.limit {
				return i
			}
		}
		if s.inStr {
			switch {
			case s.escape:
				s.escape = false
			case c == '\\':
				s.escape = true
			case c == '"':
				s.inStr = false
			case s.depth == 1 && s.keyLen < len(s.key):
				s.key[s.keyLen] = c
				s.keyLen++
			case s.depth == 1:
				s.keyLen = len(s.key) + 1 // too long to be "items"
			}
			continue
		}
		if s.inItems && s.expect && s.depth == 2 && c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != ']' {
			s.expect = false
			s.items++
			if s.maxItems > 0 && s.items > s.maxItems {
				return i
			}
		}
		switch c {
		case '"':
			s.inStr = true
			if s.depth == 1 {
				s.keyLen = 0
			}
		case '{', '[':
			if s.depth == 1 && c == '[' && s.keyLen == 5 && string(s.key[:5]) == "items" {
				s.inItems, s.expect = true, true
			}
			s.depth++
			if s.depth == s.level && s.level > 0 {
				s.n = 0 // a container at the level holds its elements: they are counted
			}
		case '}', ']':
			s.depth--
			if s.depth < s.level || (s.level == 0 && s.depth == 0) {
				s.n = 0
			}
			if s.depth == 1 {
				s.inItems = false
			}
		case ',':
			if s.depth == s.level {
				s.n = 0
			}
			if s.depth == 2 && s.inItems {
				s.expect = true
			}
		}
	}
	return -1
}

// skipString reads the string b[i:] is in (its opening quote read) up to its closing
// quote, and returns the index of that quote (the string ends there), or len(b) when the
// string goes on past b.
func (s *jsonScanner) skipString(b []byte, i int) int {
	for i < len(b) {
		if s.escape {
			s.escape = false
			i++
			continue
		}
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			s.escape = backslashesBefore(b, len(b), i)%2 == 1
			return len(b)
		}
		q := i + j
		if backslashesBefore(b, q, i)%2 == 1 {
			i = q + 1 // an escaped quote
			continue
		}
		return q
	}
	return i
}

// backslashesBefore counts the backslashes right before b[end], not before b[start].
func backslashesBefore(b []byte, end, start int) int {
	n := 0
	for p := end - 1; p >= start && b[p] == '\\'; p-- {
		n++
	}
	return n
}

// protoFrames reads the 4-byte big-endian length prefixes of a protobuf watch stream and
// refuses a frame longer than limit before it is read.
type protoFrames struct {
	limit int64
	// header holds the bytes of a length prefix read so far; remaining the bytes of the
	// frame still to come.
	header    [4]byte
	nHeader   int
	remaining int64
}

func (f *protoFrames) scan(b []byte) int {
	for i := 0; i < len(b); {
		if f.remaining > 0 {
			k := min(int64(len(b)-i), f.remaining)
			f.remaining -= k
			i += int(k)
			continue
		}
		f.header[f.nHeader] = b[i]
		f.nHeader++
		i++
		if f.nHeader == 4 {
			f.nHeader = 0
			f.remaining = int64(uint32(f.header[0])<<24 | uint32(f.header[1])<<16 | uint32(f.header[2])<<8 | uint32(f.header[3]))
			if f.remaining > f.limit {
				return i
			}
		}
	}
	return -1
}
