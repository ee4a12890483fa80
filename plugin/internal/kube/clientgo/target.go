package clientgo

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// String names the target's API server for messages: "the API server at URL (context
// "c")", without the context when none is selected.
func (t Target) String() string {
	if t.Name == "" || t.Config == nil || t.Name == t.Config.Host {
		host := ""
		if t.Config != nil {
			host = t.Config.Host
		}
		return fmt.Sprintf("the API server at %s", host)
	}
	return fmt.Sprintf("the API server at %s (context %q)", t.Config.Host, t.Name)
}

// IsAPIStatus reports whether err is an answer of the API server (a Status), as opposed
// to a failure to reach it.
func IsAPIStatus(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status)
}

// ExplainAdmin adds what the user can do about an error of a verb that needs
// cluster-admin on t: doing says what needs it ("installing the registry needs the rights
// to create CRDs, ..."). An error that is no answer of the API server names t.
func ExplainAdmin(err error, t Target, doing string) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%w\n%s (cluster-admin) on %s", err, doing, t)
	case !IsAPIStatus(err) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("talking to %s: %w", t, err)
	default:
		return err
	}
}
