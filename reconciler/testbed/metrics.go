package testbed

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// MetricsScraperName names the ServiceAccount (and its ClusterRoleBinding) that
// NewMetricsScraper creates.
const MetricsScraperName = "metrics-scraper"

// scraperTokenLifetime is the lifetime of a scraper's token: longer than any test or
// bench run.
const scraperTokenLifetime = 12 * time.Hour

// MetricsScraper reads a controller's /metrics the way Prometheus does in a cluster: over
// HTTPS, with the bearer token of a ServiceAccount that the controller has the API server
// authenticate (TokenReview) and authorize (SubjectAccessReview).
type MetricsScraper struct {
	token string
	hc    *http.Client
}

// NewMetricsScraper creates, or reuses, the ServiceAccount MetricsScraperName in
// namespace, binds it to clusterRole (the installation's
// v1alpha1.MetricsReaderRoleName, or any role granting get on /metrics) and returns a
// scraper holding a token of it from the TokenRequest API. The namespace must exist.
func NewMetricsScraper(ctx context.Context, cs kubernetes.Interface, namespace, clusterRole string) (*MetricsScraper, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: MetricsScraperName}}
	if _, err := cs.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating the ServiceAccount %s/%s: %w", namespace, MetricsScraperName, err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: MetricsScraperName + "-" + namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: MetricsScraperName}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("binding the ClusterRole %s to %s/%s: %w", clusterRole, namespace, MetricsScraperName, err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, MetricsScraperName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(scraperTokenLifetime.Seconds()))},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("requesting a token for %s/%s: %w", namespace, MetricsScraperName, err)
	}
	return NewMetricsScraperWithToken(tr.Status.Token), nil
}

// NewMetricsScraperWithToken returns a scraper that presents token ("" presents none).
// It does not verify the serving certificate, which is self-signed unless the
// controller runs with --metrics-cert-dir, as a ServiceMonitor with insecureSkipVerify
// does; the servers it reads are on loopback.
func NewMetricsScraperWithToken(token string) *MetricsScraper {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // self-signed, loopback only
	return &MetricsScraper{token: token, hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// Get reads url and returns the body of a 200 answer; another status is an error naming
// it.
func (s *MetricsScraper) Get(ctx context.Context, url string) (string, error) {
	body, status, err := s.Do(ctx, url)
	if err != nil {
		return "", err
	}
	if status != http.StatusOK {
		return "", fmt.Errorf("%s: %d %s", url, status, http.StatusText(status))
	}
	return body, nil
}

// Do reads url and returns the body and status code of the answer, whatever the status.
func (s *MetricsScraper) Do(ctx context.Context, url string) (string, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", 0, err
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", resp.StatusCode, fmt.Errorf("reading %s: %w", url, err)
	}
	return string(b), resp.StatusCode, nil
}
