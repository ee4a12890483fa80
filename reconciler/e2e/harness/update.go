package harness

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// conflictBackoff spaces the attempts of Update: 8 over about 2.5 s, enough for a
// controller that rewrites the object on every event of a busy test.
var conflictBackoff = wait.Backoff{Steps: 8, Duration: 20 * time.Millisecond, Factor: 2, Jitter: 0.1}

// Update reads obj (by its name and namespace) from c, lets mutate change it and writes it
// back, reading it again when the write conflicts: a controller may write the same object
// (a Cluster's status, a rule's conditions, a copy) between the read and the write, and a
// test that updates an object a controller also writes must not fail on "the object has
// been modified". mutate is called once per attempt, on the object as just read; obj holds
// the written object when Update returns nil.
func Update(ctx context.Context, c client.Client, obj client.Object, mutate func()) error {
	key := client.ObjectKeyFromObject(obj)
	return retry.RetryOnConflict(conflictBackoff, func() error {
		if err := c.Get(ctx, key, obj); err != nil {
			return err
		}
		mutate()
		return c.Update(ctx, obj)
	})
}
