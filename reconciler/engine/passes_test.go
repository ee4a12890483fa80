package engine

import (
	"sync"
	"testing"
	"time"
)

// TestPassesCoalesce: requests made before a pass begins are served by it; any number
// made after it began get one more pass; a pass that ends without beginning serves none;
// passes of different keys run apart.
func TestPassesCoalesce(t *testing.T) {
	type step struct {
		// begin: the pass begins; requests: how many requests arrive while the pass waits
		// before beginning, and after.
		begin         bool
		before, after int
	}
	for _, tc := range []struct {
		name  string
		steps []step // one per pass, in order
		want  int    // passes run
	}{
		{"one request", []step{{begin: true}}, 1},
		{"requests before it began are served", []step{{begin: true, before: 5}}, 1},
		{"requests after it began get one more pass", []step{{begin: true, after: 5}, {begin: true}}, 2},
		{"both", []step{{begin: true, before: 3, after: 3}, {begin: true, before: 2}}, 2},
		{"a pass that never began serves none", []step{{before: 2}, {begin: true}}, 2},
		{"nor does one with no request while it ran", []step{{}}, 1},
		{"a pass asked for after it began that never begins", []step{{begin: true, after: 1}, {before: 1}, {begin: true}}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p passes[string]
			ran := 0
			var wg sync.WaitGroup
			request := func() {
				wg.Add(1)
				go func() {
					defer wg.Done()
					p.run("k", func(func()) { t.Error("a coalesced request ran a pass of its own") })
				}()
			}
			// requests waits until the n requests sent have returned: each one is served
			// by the pass running, so it returns at once.
			requests := func(n int) {
				for range n {
					request()
				}
				wg.Wait()
			}
			p.run("k", func(begin func()) {
				if ran >= len(tc.steps) {
					t.Fatalf("pass %d: more passes than %d", ran+1, len(tc.steps))
				}
				st := tc.steps[ran]
				ran++
				requests(st.before)
				if st.begin {
					begin()
				}
				requests(st.after)
			})
			if ran != tc.want {
				t.Errorf("%d passes, want %d", ran, tc.want)
			}
			if len(p.running) != 0 {
				t.Errorf("running after the last pass: %v", p.running)
			}
		})
	}
}

// TestPassesOfKeysRunApart: a pass of one key does not serve or hold another's.
func TestPassesOfKeysRunApart(t *testing.T) {
	var p passes[string]
	release := make(chan struct{})
	started := make(chan string, 2)
	var wg sync.WaitGroup
	for _, k := range []string{"a", "b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.run(k, func(begin func()) {
				begin()
				started <- k
				<-release
			})
		}()
	}
	var got []string
	for range 2 {
		select {
		case k := <-started:
			got = append(got, k)
		case <-time.After(5 * time.Second):
			t.Fatalf("passes started: %v; want a and b at once", got)
		}
	}
	close(release)
	wg.Wait()
	if got[0] == got[1] || len(p.running) != 0 {
		t.Errorf("passes %v, running %v", got, p.running)
	}
}
