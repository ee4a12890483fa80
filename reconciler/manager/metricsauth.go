package manager

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// The caches of metricsAuth, with the lifetimes of controller-runtime's
// filters.WithAuthenticationAndAuthorization: a token's review for a minute, an allowed
// decision for five, a denied one for 30 seconds.
const (
	tokenReviewTTL    = time.Minute
	accessAllowedTTL  = 5 * time.Minute
	accessDeniedTTL   = 30 * time.Second
	reviewTimeout     = 10 * time.Second
	maxCachedReviews  = 1024
	metricsAuthRealm  = `Bearer realm="kubectl-registry metrics"`
	unauthorizedReply = "Unauthorized"
)

// newMetricsAuthFilter is the metricsserver.Options.FilterProvider of the secure /metrics:
// what controller-runtime's filters.WithAuthenticationAndAuthorization does — the bearer
// token is authenticated by the API server (TokenReview) and the user authorized for the
// request's verb on its non-resource path (SubjectAccessReview), with the same caches —
// written on client-go's typed clients alone. The upstream filter links k8s.io/apiserver
// (with CEL, OpenTelemetry and gRPC), which made the binary 10 MB larger and every
// controller's RSS about 16 MiB higher at start; the controller's memory target
// (docs/performance.md) has no room for that. Unlike the upstream filter, a token the
// API server does not know is answered 401, not 500.
func newMetricsAuthFilter(cfg *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
	authn, err := authenticationclient.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("building the TokenReview client of the metrics server: %w", err)
	}
	authz, err := authorizationclient.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("building the SubjectAccessReview client of the metrics server: %w", err)
	}
	a := newMetricsAuth(authn.TokenReviews(), authz.SubjectAccessReviews(), time.Now)
	return a.filter, nil
}

// metricsAuth authenticates and authorizes the requests of the /metrics server.
type metricsAuth struct {
	tokens  authenticationclient.TokenReviewInterface
	reviews authorizationclient.SubjectAccessReviewInterface
	now     func() time.Time

	mu    sync.Mutex
	authn map[[sha256.Size]byte]tokenEntry
	authz map[string]accessEntry
}

type tokenEntry struct {
	user          authenticationv1.UserInfo
	authenticated bool
	expires       time.Time
}

type accessEntry struct {
	allowed bool
	expires time.Time
}

func newMetricsAuth(tokens authenticationclient.TokenReviewInterface, reviews authorizationclient.SubjectAccessReviewInterface, now func() time.Time) *metricsAuth {
	return &metricsAuth{
		tokens: tokens, reviews: reviews, now: now,
		authn: map[[sha256.Size]byte]tokenEntry{},
		authz: map[string]accessEntry{},
	}
}

// filter wraps the metrics handler: 401 without a bearer token the API server
// authenticates, 403 when the user may not use the request's verb on its path, 500 when
// the API server cannot be asked.
func (a *metricsAuth) filter(log logr.Logger, next http.Handler) (http.Handler, error) {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ctx, cancel := context.WithTimeout(req.Context(), reviewTimeout)
		defer cancel()
		token, ok := bearerToken(req)
		if !ok {
			w.Header().Set("WWW-Authenticate", metricsAuthRealm)
			http.Error(w, unauthorizedReply, http.StatusUnauthorized)
			return
		}
		user, ok, err := a.authenticate(ctx, token)
		if err != nil {
			log.Error(err, "authenticating a request for the metrics")
			http.Error(w, "Authentication failed", http.StatusInternalServerError)
			return
		}
		if !ok {
			log.V(4).Info("unauthenticated request for the metrics")
			w.Header().Set("WWW-Authenticate", metricsAuthRealm)
			http.Error(w, unauthorizedReply, http.StatusUnauthorized)
			return
		}
		verb, path := strings.ToLower(req.Method), req.URL.Path
		allowed, err := a.authorize(ctx, user, verb, path)
		if err != nil {
			log.Error(err, "authorizing a request for the metrics", "user", user.Username)
			http.Error(w, "Authorization for user "+user.Username+" failed", http.StatusInternalServerError)
			return
		}
		if !allowed {
			log.V(4).Info("request for the metrics denied", "user", user.Username, "verb", verb, "path", path)
			http.Error(w, "Authorization denied for user "+user.Username, http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, req)
	}), nil
}

// bearerToken returns the token of an "Authorization: Bearer <token>" header.
func bearerToken(req *http.Request) (string, bool) {
	parts := strings.Fields(req.Header.Get("Authorization"))
	if len(parts) != 2 || !strings.EqualFold(parts[0], "bearer") {
		return "", false
	}
	return parts[1], true
}

// authenticate reviews token with the API server, or answers from the cache.
func (a *metricsAuth) authenticate(ctx context.Context, token string) (authenticationv1.UserInfo, bool, error) {
	key := sha256.Sum256([]byte(token))
	now := a.now()
	a.mu.Lock()
	e, ok := a.authn[key]
	a.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.user, e.authenticated, nil
	}
	tr, err := a.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return authenticationv1.UserInfo{}, false, fmt.Errorf("creating a TokenReview: %w", err)
	}
	e = tokenEntry{user: tr.Status.User, authenticated: tr.Status.Authenticated && tr.Status.User.Username != "", expires: now.Add(tokenReviewTTL)}
	a.mu.Lock()
	if len(a.authn) >= maxCachedReviews {
		a.authn = prune(a.authn, now, func(e tokenEntry) time.Time { return e.expires })
	}
	a.authn[key] = e
	a.mu.Unlock()
	return e.user, e.authenticated, nil
}

// authorize asks the API server whether user may use verb on the non-resource path, or
// answers from the cache.
func (a *metricsAuth) authorize(ctx context.Context, user authenticationv1.UserInfo, verb, path string) (bool, error) {
	spec := authorizationv1.SubjectAccessReviewSpec{
		User:                  user.Username,
		UID:                   user.UID,
		Groups:                user.Groups,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}
	if len(user.Extra) > 0 {
		spec.Extra = make(map[string]authorizationv1.ExtraValue, len(user.Extra))
		for k, v := range user.Extra {
			spec.Extra[k] = authorizationv1.ExtraValue(v)
		}
	}
	key := accessKey(spec)
	now := a.now()
	a.mu.Lock()
	e, ok := a.authz[key]
	a.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.allowed, nil
	}
	sar, err := a.reviews.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("creating a SubjectAccessReview: %w", err)
	}
	e = accessEntry{allowed: sar.Status.Allowed && !sar.Status.Denied, expires: now.Add(accessDeniedTTL)}
	if e.allowed {
		e.expires = now.Add(accessAllowedTTL)
	}
	a.mu.Lock()
	if len(a.authz) >= maxCachedReviews {
		a.authz = prune(a.authz, now, func(e accessEntry) time.Time { return e.expires })
	}
	a.authz[key] = e
	a.mu.Unlock()
	return e.allowed, nil
}

// accessKey identifies a SubjectAccessReview in the cache.
func accessKey(s authorizationv1.SubjectAccessReviewSpec) string {
	var b strings.Builder
	field := func(v string) { fmt.Fprintf(&b, "%d:%s", len(v), v) }
	field(s.User)
	field(s.UID)
	field(s.NonResourceAttributes.Verb)
	field(s.NonResourceAttributes.Path)
	groups := slices.Sorted(slices.Values(s.Groups))
	fmt.Fprintf(&b, "g%d", len(groups))
	for _, g := range groups {
		field(g)
	}
	keys := make([]string, 0, len(s.Extra))
	for k := range s.Extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	fmt.Fprintf(&b, "e%d", len(keys))
	for _, k := range keys {
		field(k)
		vs := slices.Sorted(slices.Values(s.Extra[k]))
		fmt.Fprintf(&b, "v%d", len(vs))
		for _, v := range vs {
			field(v)
		}
	}
	return b.String()
}

// prune drops the expired entries of a full cache, or all of them when none expired, so
// that a flood of distinct tokens cannot grow it without bound.
func prune[K comparable, V any](m map[K]V, now time.Time, expires func(V) time.Time) map[K]V {
	for k, v := range m {
		if !now.Before(expires(v)) {
			delete(m, k)
		}
	}
	if len(m) >= maxCachedReviews {
		return map[K]V{}
	}
	return m
}
