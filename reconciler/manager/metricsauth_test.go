package manager

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// reviewer answers TokenReviews and SubjectAccessReviews like an API server that knows
// the tokens of users and allows the grants (user -> "verb path"), and records them.
type reviewer struct {
	mu       sync.Mutex
	users    map[string]authenticationv1.UserInfo // token -> user
	grants   map[string]string                    // user -> "verb path"
	fail     bool                                 // every review fails
	requests []string
}

func (r *reviewer) clientset() *fake.Clientset {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		tr := a.(clienttesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.requests = append(r.requests, "TokenReview "+tr.Spec.Token)
		if r.fail {
			return true, nil, errors.New("the API server is down")
		}
		out := tr.DeepCopy()
		if u, ok := r.users[tr.Spec.Token]; ok {
			out.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: u}
		} else {
			out.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
		}
		return true, out, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		sar := a.(clienttesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		r.mu.Lock()
		defer r.mu.Unlock()
		s := sar.Spec
		what := s.NonResourceAttributes.Verb + " " + s.NonResourceAttributes.Path
		r.requests = append(r.requests, "SubjectAccessReview "+s.User+" "+what)
		if r.fail {
			return true, nil, errors.New("the API server is down")
		}
		out := sar.DeepCopy()
		out.Status.Allowed = r.grants[s.User] == what
		return true, out, nil
	})
	return cs
}

func (r *reviewer) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.requests
	r.requests = nil
	return out
}

// TestMetricsAuth: the filter answers 401 without a token the API server authenticates,
// 403 to a user that may not get the path, 500 when the API server cannot review, and
// passes the rest; reviews are cached for their lifetimes.
func TestMetricsAuth(t *testing.T) {
	rv := &reviewer{
		users: map[string]authenticationv1.UserInfo{
			"prometheus": {Username: "system:serviceaccount:monitoring:prometheus", Groups: []string{"system:serviceaccounts"}},
			"someone":    {Username: "someone"},
		},
		grants: map[string]string{"system:serviceaccount:monitoring:prometheus": "get /metrics"},
	}
	cs := rv.clientset()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	auth := newMetricsAuth(cs.AuthenticationV1().TokenReviews(), cs.AuthorizationV1().SubjectAccessReviews(), func() time.Time { return now })
	h, err := auth.filter(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metrics")) }))
	if err != nil {
		t.Fatal(err)
	}
	type step struct {
		name     string
		advance  time.Duration
		method   string
		header   string
		fail     bool
		want     int
		requests []string
	}
	const (
		trProm = "TokenReview prometheus"
		sarGet = "SubjectAccessReview system:serviceaccount:monitoring:prometheus get /metrics"
	)
	steps := []step{
		{name: "no header", want: http.StatusUnauthorized},
		{name: "basic auth", header: "Basic dXNlcjpwYXNz", want: http.StatusUnauthorized},
		{name: "empty bearer", header: "Bearer ", want: http.StatusUnauthorized},
		{name: "unknown token", header: "Bearer nope", want: http.StatusUnauthorized, requests: []string{"TokenReview nope"}},
		{name: "unknown token, cached", header: "Bearer nope", want: http.StatusUnauthorized},
		{name: "allowed", header: "Bearer prometheus", want: http.StatusOK, requests: []string{trProm, sarGet}},
		{name: "allowed, cached", header: "bearer  prometheus", want: http.StatusOK},
		{name: "other verb", method: http.MethodPost, header: "Bearer prometheus", want: http.StatusForbidden,
			requests: []string{"SubjectAccessReview system:serviceaccount:monitoring:prometheus post /metrics"}},
		{name: "not granted", header: "Bearer someone", want: http.StatusForbidden,
			requests: []string{"TokenReview someone", "SubjectAccessReview someone get /metrics"}},
		{name: "not granted, cached", header: "Bearer someone", want: http.StatusForbidden},
		{name: "token review expired, access cached", advance: tokenReviewTTL, header: "Bearer prometheus", want: http.StatusOK, requests: []string{trProm}},
		{name: "denial expired", advance: accessDeniedTTL, header: "Bearer someone", want: http.StatusForbidden,
			requests: []string{"TokenReview someone", "SubjectAccessReview someone get /metrics"}},
		{name: "API server down, cache still valid", fail: true, header: "Bearer prometheus", want: http.StatusOK},
		{name: "API server down", advance: accessAllowedTTL, fail: true, header: "Bearer prometheus", want: http.StatusInternalServerError, requests: []string{trProm}},
		{name: "API server back", header: "Bearer prometheus", want: http.StatusOK, requests: []string{trProm, sarGet}},
	}
	for _, s := range steps {
		now = now.Add(s.advance)
		rv.mu.Lock()
		rv.fail = s.fail
		rv.mu.Unlock()
		method := s.method
		if method == "" {
			method = http.MethodGet
		}
		req := httptest.NewRequest(method, "/metrics", nil)
		if s.header != "" {
			req.Header.Set("Authorization", s.header)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != s.want {
			t.Errorf("%s: status %d, want %d (%s)", s.name, rec.Code, s.want, rec.Body.String())
		}
		if s.want == http.StatusUnauthorized && rec.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("%s: 401 without WWW-Authenticate", s.name)
		}
		if diff := cmp.Diff(s.requests, rv.take()); diff != "" {
			t.Errorf("%s: reviews (-want +got):\n%s", s.name, diff)
		}
	}
}

// TestMetricsAuthReviewsTheWholeUser: the SubjectAccessReview carries the user's name,
// UID, groups and extra, and users differing in any of them are reviewed apart.
func TestMetricsAuthReviewsTheWholeUser(t *testing.T) {
	base := authorizationv1.SubjectAccessReviewSpec{
		User: "u", UID: "1", Groups: []string{"a", "b"},
		Extra:                 map[string]authorizationv1.ExtraValue{"k": {"v1", "v2"}},
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
	}
	variants := map[string]func(*authorizationv1.SubjectAccessReviewSpec){
		"user":        func(s *authorizationv1.SubjectAccessReviewSpec) { s.User = "v" },
		"uid":         func(s *authorizationv1.SubjectAccessReviewSpec) { s.UID = "2" },
		"groups":      func(s *authorizationv1.SubjectAccessReviewSpec) { s.Groups = []string{"a"} },
		"group split": func(s *authorizationv1.SubjectAccessReviewSpec) { s.Groups = []string{"a", "b", ""} },
		"extra value": func(s *authorizationv1.SubjectAccessReviewSpec) {
			s.Extra = map[string]authorizationv1.ExtraValue{"k": {"v1"}}
		},
		"extra key": func(s *authorizationv1.SubjectAccessReviewSpec) {
			s.Extra = map[string]authorizationv1.ExtraValue{"l": {"v1", "v2"}}
		},
		"path":         func(s *authorizationv1.SubjectAccessReviewSpec) { s.NonResourceAttributes.Path = "/metricsx" },
		"verb":         func(s *authorizationv1.SubjectAccessReviewSpec) { s.NonResourceAttributes.Verb = "post" },
		"no extra":     func(s *authorizationv1.SubjectAccessReviewSpec) { s.Extra = nil },
		"no groups":    func(s *authorizationv1.SubjectAccessReviewSpec) { s.Groups = nil },
		"joined names": func(s *authorizationv1.SubjectAccessReviewSpec) { s.User, s.UID = "u1", "" },
	}
	key := accessKey(base)
	reordered := *base.DeepCopy()
	reordered.Groups = []string{"b", "a"}
	reordered.Extra = map[string]authorizationv1.ExtraValue{"k": {"v2", "v1"}}
	if accessKey(reordered) != key {
		t.Error("the order of groups or extra values changes the cache key")
	}
	seen := map[string]string{key: "base"}
	for name, mutate := range variants {
		s := *base.DeepCopy()
		mutate(&s)
		k := accessKey(s)
		if other, dup := seen[k]; dup {
			t.Errorf("%s and %s have the same cache key", name, other)
		}
		seen[k] = name
	}

	// What the SubjectAccessReview carries.
	var got []authorizationv1.SubjectAccessReviewSpec
	cs := fake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		tr := a.(clienttesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{
			Username: "u", UID: "1", Groups: []string{"a", "b"}, Extra: map[string]authenticationv1.ExtraValue{"k": {"v1", "v2"}},
		}}
		return true, tr, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		sar := a.(clienttesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		got = append(got, sar.Spec)
		sar.Status.Allowed = true
		return true, sar, nil
	})
	auth := newMetricsAuth(cs.AuthenticationV1().TokenReviews(), cs.AuthorizationV1().SubjectAccessReviews(), time.Now)
	h, err := auth.filter(logr.Discard(), http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Authorization", "Bearer t")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if diff := cmp.Diff([]authorizationv1.SubjectAccessReviewSpec{base}, got); diff != "" || rec.Code != http.StatusOK {
		t.Errorf("status %d; SubjectAccessReview (-want +got):\n%s", rec.Code, diff)
	}
}

// TestMetricsAuthCacheIsBounded: a flood of distinct tokens never grows the cache past
// its bound.
func TestMetricsAuthCacheIsBounded(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		return true, a.(clienttesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy(), nil
	})
	auth := newMetricsAuth(cs.AuthenticationV1().TokenReviews(), cs.AuthorizationV1().SubjectAccessReviews(), time.Now)
	for i := range 3 * maxCachedReviews {
		if _, ok, err := auth.authenticate(t.Context(), "token-"+string(rune('a'+i%26))+time.Duration(i).String()); err != nil || ok {
			t.Fatalf("authenticate: %v, %v", ok, err)
		}
		if n := len(auth.authn); n > maxCachedReviews {
			t.Fatalf("%d cached token reviews, bound %d", n, maxCachedReviews)
		}
	}
}
