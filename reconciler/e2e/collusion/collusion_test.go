package collusion

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/e2e/harness"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

var (
	bed   *testbed.Bed
	names = []string{"first", "second", "third", "fourth", "fifth"}
)

func TestMain(m *testing.M) {
	os.Exit(testbed.Main(m, testbed.Options{Names: names, CRDDirectoryPaths: []string{"../../../manifests/crds"}}, &bed))
}

// TestCollusion: in a group of five, the admins of first and second (their controllers
// stopped, as a hostile admin may) record the departure of third, in force, on their own
// Clusters, and on their copies of every other member's Cluster claim that member
// confirmed it. Two records of five remove nothing: third stays a member of every honest
// member, and third itself does not forget the group. A third record, by an honest
// member's admin (leave third on fourth), makes a strict majority: the departure takes
// effect, so the two records were read and counted, and were not enough.
func TestCollusion(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	cl, ctls := harness.FormGroupControllers(t, bed, nil, names...)
	ctx := context.Background()
	ids := map[string]types.UID{}
	for _, n := range names {
		id, err := bed.Cluster(n).KubeSystemUID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids[n] = id
	}
	victim := string(ids["third"])
	at := time.Now().UTC().Format(time.RFC3339Nano)
	for _, colluder := range []string{"first", "second"} {
		ctls[colluder].Stop(t)
		record := map[string]string{
			v1alpha1.LeftClustersAnnotation:        victim + "@" + at,
			v1alpha1.ConfirmedDeparturesAnnotation: victim + "@" + at,
		}
		annotate(t, cl[colluder], colluder, record)
		for _, other := range names {
			if other != colluder && other != "third" {
				annotate(t, cl[colluder], other, map[string]string{v1alpha1.ConfirmedDeparturesAnnotation: victim + "@" + at})
			}
		}
	}
	honest := []string{"third", "fourth", "fifth"}
	harness.Stays(t, 20*time.Second, "third stays a member of the honest members, and of itself", func() error {
		for _, n := range []string{"fourth", "fifth"} {
			if _, ok, err := harness.HoldsClusterOf(cl[n], ids["third"]); err != nil || !ok {
				return fmt.Errorf("%s dropped third (%v)", n, err)
			}
		}
		for _, n := range honest {
			if _, ok, err := harness.HoldsClusterOf(cl["third"], ids[n]); err != nil || !ok {
				return fmt.Errorf("third forgot %s (%v)", n, err)
			}
		}
		var own v1alpha1.Cluster
		if err := cl["third"].Get(ctx, client.ObjectKey{Name: "third"}, &own); err != nil {
			return err
		}
		if v := own.Annotations[v1alpha1.LeftClustersAnnotation]; strings.Contains(v, victim) {
			return fmt.Errorf("third's controller decided it left: %s", v)
		}
		return nil
	})

	harness.RunCLI(t, bed.KubeconfigPath, "leave", "third", "--context", "fourth")
	harness.Eventually(t, 90*time.Second, "with a third record of five, fourth and fifth drop third", func() error {
		for _, n := range []string{"fourth", "fifth"} {
			if _, ok, err := harness.HoldsClusterOf(cl[n], ids["third"]); err != nil || ok {
				return fmt.Errorf("%s still holds third (%v)", n, err)
			}
		}
		return nil
	})
}

// annotate sets annotations on the Cluster name of cl, as the cluster's admin does.
func annotate(t *testing.T, cl client.Client, name string, set map[string]string) {
	t.Helper()
	c := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := harness.Update(context.Background(), cl, c, func() {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		for k, v := range set {
			c.Annotations[k] = v
		}
	}); err != nil {
		t.Fatal(err)
	}
}
