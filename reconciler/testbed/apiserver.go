package testbed

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
)

// apiServerReadyPoll is how often StartAPIServer asks /readyz after the process is up.
const apiServerReadyPoll = 100 * time.Millisecond

// StopAPIServer stops the cluster's kube-apiserver gracefully (SIGTERM, SIGKILL after the
// control plane's stop timeout) and waits for it to exit. etcd, kube-controller-manager
// and the proxy keep running: through the proxy a connection is accepted and closed at
// once, as a load balancer in front of a dead API server does, and direct connections are
// refused. Stopping a stopped API server is a no-op. StartAPIServer brings it back.
func (c *Cluster) StopAPIServer() error {
	c.apiMu.Lock()
	defer c.apiMu.Unlock()
	if c.apiStopped {
		return nil
	}
	// Marked before stopping: even a Stop that had to SIGKILL leaves no API server.
	c.apiStopped = true
	if err := c.env.ControlPlane.APIServer.Stop(); err != nil {
		return fmt.Errorf("cluster %s: stopping kube-apiserver: %w", c.Name, err)
	}
	return nil
}

// StartAPIServer starts the API server StopAPIServer stopped, on the same port, with the
// same serving certificate and CA, client CA, service-account signing key and etcd data:
// Host, Config, DirectConfig, the Bed's kubeconfig, users made by ConfigFor and tokens
// issued before the stop all keep working, and every object is still there. It returns
// once /readyz answers, or with an error quoting the API server's log. Starting a running
// API server is a no-op.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	c.apiMu.Lock()
	defer c.apiMu.Unlock()
	if !c.apiStopped {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("cluster %s: starting kube-apiserver: %w", c.Name, context.Cause(ctx))
	}
	api := c.env.ControlPlane.APIServer
	// envtest keeps the port, certificate directory (it only generates certificates that
	// are missing) and the client-certificate authority of its first start.
	if err := api.Start(); err != nil {
		return fmt.Errorf("cluster %s: starting kube-apiserver again: %w%s", c.Name, err, c.apiServerLogTail())
	}
	c.apiStopped = false
	ctx, cancel := context.WithTimeout(ctx, controlPlaneStartTimeout)
	defer cancel()
	if err := c.waitReady(ctx); err != nil {
		return fmt.Errorf("cluster %s: kube-apiserver restarted but not ready: %w%s", c.Name, err, c.apiServerLogTail())
	}
	return nil
}

// RestartAPIServer is StopAPIServer followed at once by StartAPIServer.
func (c *Cluster) RestartAPIServer(ctx context.Context) error {
	if err := c.StopAPIServer(); err != nil {
		return err
	}
	return c.StartAPIServer(ctx)
}

// APIServerRunning reports whether the API server runs, that is, it was not stopped by
// StopAPIServer or has been started again since.
func (c *Cluster) APIServerRunning() bool {
	c.apiMu.Lock()
	defer c.apiMu.Unlock()
	return !c.apiStopped
}

// waitReady polls the API server's /readyz directly until it answers 200 or ctx ends.
func (c *Cluster) waitReady(ctx context.Context) error {
	hc, err := rest.HTTPClientFor(c.direct)
	if err != nil {
		return err
	}
	url := c.APIServerURL() + "/readyz"
	var last error
	for {
		last = get(ctx, hc, url)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", context.Cause(ctx), last)
		case <-time.After(apiServerReadyPoll):
		}
	}
}

// get requests url and fails unless the answer is 200 OK.
func get(ctx context.Context, hc *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// apiServerLogTail returns the end of the API server's log, formatted for an error.
func (c *Cluster) apiServerLogTail() string {
	if f, ok := c.env.ControlPlane.APIServer.Out.(interface{ Name() string }); ok {
		return logTail(f.Name())
	}
	return ""
}
