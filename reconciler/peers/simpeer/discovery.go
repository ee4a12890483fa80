package simpeer

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// aggregatedContentType is the media type of aggregated discovery (apidiscovery v2),
// which client-go asks for first.
const aggregatedContentType = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

// Discovery is what a server answers to discovery requests: documents by path (/api,
// /apis, /api/v1, /apis/GROUP/VERSION, /version), and for /api and /apis the aggregated
// form too, answered when the client accepts it.
type Discovery struct {
	Docs       map[string][]byte `json:"docs"`
	Aggregated map[string][]byte `json:"aggregated,omitempty"`
}

func (d *Discovery) lookup(path, accept string) ([]byte, string, bool) {
	if doc, ok := d.Aggregated[path]; ok && strings.Contains(accept, "g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList") {
		return doc, aggregatedContentType, true
	}
	doc, ok := d.Docs[path]
	return doc, "application/json", ok
}

// CaptureDiscovery reads the discovery documents of a real API server, so that
// simulated servers answer what it does: /version, /api, /apis, every group version's
// resources, and the aggregated /api and /apis when it serves them.
func CaptureDiscovery(ctx context.Context, cfg *rest.Config) (*Discovery, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("a client for %s: %w", cfg.Host, err)
	}
	get := func(path, accept string) ([]byte, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+path, nil)
		if err != nil {
			return nil, "", err
		}
		req.Header.Set("Accept", accept)
		resp, err := hc.Do(req)
		if err != nil {
			return nil, "", fmt.Errorf("discovery %s: %w", path, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, "", fmt.Errorf("discovery %s: %w", path, err)
		}
		if resp.StatusCode != http.StatusOK {
			return nil, "", fmt.Errorf("discovery %s: HTTP %d", path, resp.StatusCode)
		}
		return body, resp.Header.Get("Content-Type"), nil
	}
	d := &Discovery{Docs: map[string][]byte{}, Aggregated: map[string][]byte{}}
	for _, p := range []string{"/version", "/api", "/apis", "/api/v1"} {
		if d.Docs[p], _, err = get(p, "application/json"); err != nil {
			return nil, err
		}
	}
	for _, p := range []string{"/api", "/apis"} {
		doc, ct, err := get(p, aggregatedContentType)
		if err != nil {
			return nil, err
		}
		// A server without aggregated discovery answers the plain document: then the
		// simulated servers have none either, and clients read every group version.
		if strings.Contains(ct, "as=APIGroupDiscoveryList") {
			d.Aggregated[p] = doc
		}
	}
	var groups metav1.APIGroupList
	if err := json.Unmarshal(d.Docs["/apis"], &groups); err != nil {
		return nil, fmt.Errorf("discovery /apis: %w", err)
	}
	for _, g := range groups.Groups {
		for _, v := range g.Versions {
			p := "/apis/" + v.GroupVersion
			if d.Docs[p], _, err = get(p, "application/json"); err != nil {
				return nil, err
			}
		}
	}
	return d, nil
}

// BuiltinDiscovery is the discovery of resources alone (no aggregated form: clients fall
// back to the documents of each group version).
func BuiltinDiscovery(resources []Resource) *Discovery {
	d := &Discovery{Docs: map[string][]byte{}}
	byGV := map[string][]metav1.APIResource{}
	groups := map[string][]string{}
	for _, r := range resources {
		gv := r.GroupVersion()
		if _, ok := byGV[gv]; !ok && r.Group != "" {
			groups[r.Group] = append(groups[r.Group], r.Version)
		}
		byGV[gv] = append(byGV[gv], metav1.APIResource{Name: r.Resource, Kind: r.Kind, Namespaced: r.Namespaced, Verbs: metav1.Verbs{"get", "list", "watch"}})
	}
	mustJSON := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err) // plain structs always marshal
		}
		return b
	}
	d.Docs["/version"] = mustJSON(map[string]string{"major": "1", "minor": "36", "gitVersion": "v1.36.0-simpeer"})
	d.Docs["/api"] = mustJSON(metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"},
		ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: "127.0.0.1"}}})
	list := metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
	names := make([]string, 0, len(groups))
	for g := range groups {
		names = append(names, g)
	}
	sort.Strings(names)
	for _, g := range names {
		grp := metav1.APIGroup{Name: g}
		for _, v := range groups[g] {
			grp.Versions = append(grp.Versions, metav1.GroupVersionForDiscovery{GroupVersion: g + "/" + v, Version: v})
		}
		grp.PreferredVersion = grp.Versions[0]
		list.Groups = append(list.Groups, grp)
	}
	d.Docs["/apis"] = mustJSON(list)
	for gv, rs := range byGV {
		p := "/apis/" + gv
		if !strings.Contains(gv, "/") {
			p = "/api/" + gv
		}
		d.Docs[p] = mustJSON(metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv, APIResources: rs})
	}
	return d
}
