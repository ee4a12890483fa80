package peers

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// lazyJSON produces a JSON list whose only item holds a string of size bytes, without
// ever holding it, and counts the bytes read from it.
type lazyReader struct {
	prefix, suffix string
	size           int64 // bytes of filler between them
	off            int64
	read           int64
}

func (r *lazyReader) Read(p []byte) (int, error) {
	total := int64(len(r.prefix)) + r.size + int64(len(r.suffix))
	if r.off >= total {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) && r.off < total {
		switch {
		case r.off < int64(len(r.prefix)):
			p[n] = r.prefix[r.off]
		case r.off < int64(len(r.prefix))+r.size:
			p[n] = 'x'
		default:
			p[n] = r.suffix[r.off-int64(len(r.prefix))-r.size]
		}
		n++
		r.off++
	}
	r.read += int64(n)
	return n, nil
}

func (r *lazyReader) Close() error { return nil }

func readAll(t *testing.T, b io.Reader) ([]byte, error) {
	t.Helper()
	return io.ReadAll(b)
}

func TestLimitedBodyResponse(t *testing.T) {
	const limit = 1000
	l := Limits{MaxResponseBytes: limit, MaxObjectBytes: 1 << 20}
	for _, tc := range []struct {
		size    int
		refused bool
	}{{limit - 1, false}, {limit, false}, {limit + 1, true}} {
		t.Run(fmt.Sprint(tc.size), func(t *testing.T) {
			body := strings.Repeat("a", tc.size)
			var hooked *TooLargeError
			b := newLimitedBody(io.NopCloser(strings.NewReader(body)), "/api/v1/configmaps", false, "text/plain", l, func(e *TooLargeError) { hooked = e })
			got, err := readAll(t, b)
			var tl *TooLargeError
			if tc.refused {
				if !errors.As(err, &tl) || tl.What != TooLargeResponse || tl.Limit != limit || hooked == nil {
					t.Fatalf("want a TooLargeError on the response, got %v (hook %v)", err, hooked)
				}
				if len(got) != limit {
					t.Fatalf("passed on %d bytes, want the %d under the limit", len(got), limit)
				}
				if !IsTooLarge(fmt.Errorf("decoding: %v", err)) {
					t.Fatal("IsTooLarge does not know the message")
				}
				return
			}
			if err != nil || string(got) != body || hooked != nil {
				t.Fatalf("under the limit: err %v, %d bytes, hook %v", err, len(got), hooked)
			}
		})
	}
}

// A response that would be 300 MB is refused after at most the limit (plus one read
// buffer): it is never read, nor allocated, whole.
func TestLimitedBodyStopsEarly(t *testing.T) {
	src := &lazyReader{prefix: `{"kind":"ConfigMapList","items":[{"data":{"a":"`, size: 300 << 20, suffix: `"}}]}`}
	b := newLimitedBody(src, "/api/v1/configmaps", false, "application/json", Limits{MaxResponseBytes: 64 << 20, MaxObjectBytes: 3 << 20}, nil)
	_, err := io.Copy(io.Discard, b)
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.What != TooLargeObject {
		t.Fatalf("want the object refused, got %v", err)
	}
	if src.read > 3<<20+64<<10 {
		t.Fatalf("read %d bytes of the peer's 300 MB, want about the 3 MiB object limit", src.read)
	}
	// A body of many small objects is cut at the response limit.
	var sb strings.Builder
	sb.WriteString(`{"items":[`)
	item := `{"metadata":{"name":"x"},"data":{"a":"` + strings.Repeat("y", 1000) + `"}}`
	for i := 0; sb.Len() < 1<<20; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(item)
	}
	sb.WriteString(`]}`)
	b = newLimitedBody(io.NopCloser(strings.NewReader(sb.String())), "/p", false, "application/json", Limits{MaxResponseBytes: 512 << 10, MaxObjectBytes: 2000}, nil)
	_, err = io.Copy(io.Discard, b)
	if !errors.As(err, &tl) || tl.What != TooLargeResponse {
		t.Fatalf("want the response refused, got %v", err)
	}
	// The same list under both limits reads whole, and decodes.
	b = newLimitedBody(io.NopCloser(strings.NewReader(sb.String())), "/p", false, "application/json", Limits{MaxResponseBytes: 2 << 20, MaxObjectBytes: 2000}, nil)
	got, err := io.ReadAll(b)
	if err != nil || json.Unmarshal(got, &map[string]any{}) != nil {
		t.Fatalf("a list under the limits: %v", err)
	}
}

func TestLimitedBodyObjectInList(t *testing.T) {
	l := Limits{MaxResponseBytes: 1 << 20, MaxObjectBytes: 100}
	small := `{"metadata":{"name":"a"},"data":{"k":"v, with \"quotes\" and {braces]"}}`
	for _, tc := range []struct {
		name, body string
		refused    bool
	}{
		{"small items", `{"kind":"List","metadata":{"resourceVersion":"1"},"items":[` + small + `,` + small + `,` + small + `]}`, false},
		{"one large item", `{"kind":"List","items":[` + small + `,{"data":{"k":"` + strings.Repeat("z", 200) + `"}}]}`, true},
		{"a large scalar item", `{"items":["` + strings.Repeat("z", 200) + `"]}`, true},
		{"an escaped quote does not end the string", `{"items":[{"k":"\"` + strings.Repeat(`\"`, 100) + `"}]}`, true},
		{"escaped backslashes end the string", `{"items":[{"k":"\\\\"},{"k":"` + strings.Repeat(`\\`, 20) + `"}` + strings.Repeat(`,{"a":"b"}`, 20) + `]}`, false},
		{"a quote after escaped backslashes ends the string, one escaped does not", `{"items":[{"k":"\\\"` + strings.Repeat("x", 120) + `"}]}`, true},
		{"the whole list over the object limit, each item under it", `{"items":[` + strings.Repeat(small+",", 20) + small + `]}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Whole, and one byte at a time (strings and escapes split across reads).
			for _, r := range []io.Reader{strings.NewReader(tc.body), &oneByte{r: strings.NewReader(tc.body)}} {
				b := newLimitedBody(io.NopCloser(r), "/p", false, "application/json", l, nil)
				_, err := io.ReadAll(b)
				var tl *TooLargeError
				if tc.refused != errors.As(err, &tl) {
					t.Fatalf("refused %v, want %v (err %v)", err != nil, tc.refused, err)
				}
			}
		})
	}
}

// A watch stream whose third event is too large: the first two are decoded, the third
// is refused while it is read, and the stream itself has no limit.
func TestLimitedBodyWatchFrames(t *testing.T) {
	const limit = 4096
	ev := func(size int) string {
		return `{"type":"ADDED","object":{"metadata":{"name":"n"},"data":{"k":"` + strings.Repeat("v", size) + `"}}}` + "\n"
	}
	var stream bytes.Buffer
	for range 10 { // the stream is 10 times the limit: only frames count
		stream.WriteString(ev(limit / 2))
	}
	src := &lazyReader{prefix: ev(100) + ev(limit-200), size: 300 << 20, suffix: "\"}}}\n"}
	src.prefix += `{"type":"ADDED","object":{"data":{"k":"`
	b := newLimitedBody(src, "/api/v1/configmaps", true, "application/json", Limits{MaxResponseBytes: 1000, MaxObjectBytes: limit}, nil)
	dec := json.NewDecoder(b)
	for i := range 2 {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("event %d: %v", i+1, err)
		}
	}
	var m map[string]any
	err := dec.Decode(&m)
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.What != TooLargeObject {
		t.Fatalf("third event: want a TooLargeError, got %v", err)
	}
	if src.read > 3*limit+64<<10 {
		t.Fatalf("read %d bytes of the stream, want about three events", src.read)
	}
	// A long stream of events under the limit reads whole.
	b = newLimitedBody(io.NopCloser(bytes.NewReader(stream.Bytes())), "/p", true, "application/json", Limits{MaxResponseBytes: 1000, MaxObjectBytes: limit}, nil)
	dec = json.NewDecoder(b)
	for i := range 10 {
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("event %d of a stream under the limit: %v", i+1, err)
		}
	}
}

func TestLimitedBodyProtobufWatch(t *testing.T) {
	var stream bytes.Buffer
	frame := func(n int) {
		var h [4]byte
		binary.BigEndian.PutUint32(h[:], uint32(n))
		stream.Write(h[:])
		stream.Write(bytes.Repeat([]byte{7}, min(n, 1000)))
	}
	frame(100)
	frame(1000)
	frame(300 << 20) // announced, never sent
	b := newLimitedBody(io.NopCloser(&oneByte{r: &stream}), "/p", true, "application/vnd.kubernetes.protobuf;stream=watch", Limits{MaxObjectBytes: 1000}, nil)
	got, err := io.ReadAll(b)
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.What != TooLargeObject {
		t.Fatalf("want the third frame refused, got %v", err)
	}
	if len(got) != 4+100+4+1000+4 {
		t.Fatalf("passed on %d bytes, want the first two frames and the third's header", len(got))
	}
}

// oneByte reads one byte at a time: headers split across reads.
type oneByte struct{ r io.Reader }

func (o *oneByte) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return o.r.Read(p[:1])
}

func TestLimitTransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") == "true" {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"type":"ADDED","object":{"k":"%s"}}`, strings.Repeat("a", 5000))
			return
		}
		_, _ = io.Copy(w, io.LimitReader(&lazyReader{size: 300 << 20}, 300<<20))
	}))
	defer srv.Close()
	var transportHook int
	c := Limited(srv.Client(), Limits{MaxResponseBytes: 1 << 20, MaxObjectBytes: 1000}, func(*TooLargeError) { transportHook++ })

	get := func(ctx context.Context, q string) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/v1/configmaps"+q, nil)
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		_, err = io.ReadAll(resp.Body)
		return err
	}
	if err := get(context.Background(), ""); !IsTooLarge(err) || transportHook != 1 {
		t.Fatalf("a 300 MB response: %v, hook called %d times", err, transportHook)
	}
	var ctxHook *TooLargeError
	ctx := WithRefusalHook(context.Background(), func(e *TooLargeError) { ctxHook = e })
	if err := get(ctx, "?watch=true"); !IsTooLarge(err) || ctxHook == nil || ctxHook.What != TooLargeObject || transportHook != 1 {
		t.Fatalf("a large watch event: %v, context hook %v, transport hook called %d times", err, ctxHook, transportHook)
	}
}

// BenchmarkLimitedBodyWatch: the cost of the limits on a watch stream of small objects,
// per byte (b.SetBytes), against reading it without them.
func BenchmarkLimitedBodyWatch(b *testing.B) {
	ev := `{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"n","namespace":"ns","labels":{"a":"b"},"annotations":{"k":"v \"q\""}},"data":{"k":"` + strings.Repeat("v", 600) + `"}}}` + "\n"
	stream := []byte(strings.Repeat(ev, 1000))
	buf := make([]byte, 32<<10)
	for _, limited := range []bool{false, true} {
		b.Run(fmt.Sprintf("limited=%v", limited), func(b *testing.B) {
			b.SetBytes(int64(len(stream)))
			for range b.N {
				var r io.Reader = bytes.NewReader(stream)
				if limited {
					r = newLimitedBody(io.NopCloser(r), "/p", true, "application/json", Limits{}.withDefaults(), nil)
				}
				for {
					if _, err := r.Read(buf); err != nil {
						break
					}
				}
			}
		})
	}
}
