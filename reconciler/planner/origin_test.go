package planner

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

// TestExplain: what sync-diff says about the origin a copy follows, and about the
// candidates passed over.
func TestExplain(t *testing.T) {
	fromA := planDirect(planObj(planMarked(planOrigA), planData("a", "from-a")))
	fromB := planCand(planRuleID, "peer-b", planOrigB, planOrigB, planObj(planMarked(planOrigB), planData("a", "from-b")))
	hopA := planCand(planRuleID, "peer-c", planOrigC, planOrigA, planObj(planMarked(planOrigA), planData("a", "from-a-via-c")))
	type passed struct{ Peer, Why string }
	tests := []struct {
		name       string
		in         Input
		wantAction ActionType
		wantWhy    string
		wantPassed []passed
	}{
		{
			name:       "a new copy, one origin",
			in:         Input{LocalID: planLocal, Candidates: []Candidate{fromB}},
			wantAction: ActionCreate,
			wantWhy:    "origin uid-b is the only origin that has it",
		},
		{
			name:       "a new copy, two origins: the lowest cluster ID",
			in:         Input{LocalID: planLocal, Candidates: []Candidate{fromB, fromA}},
			wantAction: ActionCreate,
			wantWhy:    "origin uid-a has the lowest cluster ID of the 2 origins that have it",
			wantPassed: []passed{{"peer-b", "origin uid-b has a higher cluster ID than uid-a"}},
		},
		{
			name: "a copy of B keeps following B",
			in: Input{LocalID: planLocal, Candidates: []Candidate{fromA, fromB},
				Observed: planObj(planMarked(planOrigB), planData("a", "from-b"), planServerMeta("4"))},
			wantAction: ActionNone,
			wantWhy:    "the copy keeps following its origin uid-b, which still has it (a copy changes origin only when its origin no longer has the object)",
			wantPassed: []passed{{"peer-a", "the copy keeps following its origin uid-b, which still has it"}},
		},
		{
			name: "a copy of C, which is gone: the lowest of the others takes over",
			in: Input{LocalID: planLocal, Candidates: []Candidate{fromB, fromA}, OriginGone: map[types.UID]bool{planOrigC: true},
				Observed: planObj(planMarked(planOrigC), planServerMeta("4"))},
			wantAction: ActionUpdate,
			wantWhy:    "the copy's origin uid-c no longer has it; uid-a has the lowest cluster ID of the 2 origins that do",
			wantPassed: []passed{{"peer-b", "origin uid-b has a higher cluster ID than uid-a"}},
		},
		{
			name:       "one origin, read directly and through a hop",
			in:         Input{LocalID: planLocal, Candidates: []Candidate{hopA, fromA}},
			wantAction: ActionCreate,
			wantWhy:    "origin uid-a is the only origin that has it",
			wantPassed: []passed{{"peer-c", "a copy of origin uid-a read through peer-c: the origin itself is read"}},
		},
		{
			name: "a delete follows no candidate",
			in: Input{LocalID: planLocal, OriginGone: map[types.UID]bool{planOrigB: true},
				Observed: planObj(planMarked(planOrigB), planServerMeta("4"))},
			wantAction: ActionDelete,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			act := planDecide(t, tt.in)
			if act.Type != tt.wantAction {
				t.Fatalf("Decide() = %s (%s), want %s", act.Type, act.Reason, tt.wantAction)
			}
			why, ps := Explain(tt.in, act)
			var got []passed
			for _, p := range ps {
				got = append(got, passed{p.Peer, p.Why})
			}
			if diff := cmp.Diff(tt.wantWhy, why); diff != "" {
				t.Errorf("why (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantPassed, got); diff != "" {
				t.Errorf("passed (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzChoose builds candidates from arbitrary bytes (origins, source peers, rules and
// names drawn from small alphabets, so that they collide) and checks the rule every
// member relies on: the chosen origin is the lowest cluster ID offered, the choice does
// not depend on the order of the input, and Explain accounts for every other candidate.
func FuzzChoose(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7}, int64(1))
	f.Add([]byte{3, 3, 0, 0, 2, 1, 1, 1, 0, 2, 2, 2}, int64(7))
	f.Fuzz(func(t *testing.T, data []byte, seed int64) {
		ids := []types.UID{"uid-a", "uid-b", "uid-b2", "uid-c"}
		var cands []Candidate
		for i := 0; i+3 < len(data) && len(cands) < 16; i += 4 {
			origin := ids[int(data[i])%len(ids)]
			peerID := ids[int(data[i+1])%len(ids)]
			rule := fmt.Sprintf("r%d", data[i+2]%3)
			peer := fmt.Sprintf("p%d", data[i+3]%3)
			cands = append(cands, planCand(rule, peer, peerID, origin, planObj(planMarked(origin), planData("n", fmt.Sprint(len(cands))))))
		}
		got := Choose(cands)
		if len(cands) == 0 {
			if got != nil {
				t.Fatalf("Choose(none) = %+v", got)
			}
			return
		}
		lowest := cands[0].Origin
		for _, c := range cands {
			lowest = min(lowest, c.Origin)
		}
		if got.Origin != lowest {
			t.Fatalf("Choose() follows origin %s, want the lowest %s: %v", got.Origin, lowest, planNames(cands))
		}
		shuffled := append([]Candidate(nil), cands...)
		rand.New(rand.NewSource(seed)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		again := Choose(shuffled)
		if again.Origin != got.Origin || again.PeerID != got.PeerID || again.Rule != got.Rule || again.Peer != got.Peer {
			t.Fatalf("Choose() depends on the input order: %s then %s", planNames([]Candidate{*got}), planNames([]Candidate{*again}))
		}
		in := Input{LocalID: planLocal, Candidates: shuffled}
		act := Decide(in)
		if act.Type != ActionCreate || act.Source.Origin != lowest {
			t.Fatalf("Decide() = %s from %v, want a create from %s", act.Type, act.Source, lowest)
		}
		why, passed := Explain(in, act)
		if why == "" || len(passed) != len(cands)-1 {
			t.Fatalf("Explain() = %q with %d passed over, want a reason and %d", why, len(passed), len(cands)-1)
		}
		for _, p := range passed {
			if p.Why == "" || Less(p.Candidate, *act.Source) {
				t.Fatalf("Explain() passes over %v (%q), which sorts before the chosen one", planNames([]Candidate{p.Candidate}), p.Why)
			}
		}
	})
}

// TestTakesOver: only an update from another origin than the copy's changes its origin.
func TestTakesOver(t *testing.T) {
	fromA := planDirect(planObj(planMarked(planOrigA), planData("a", "from-a")))
	copyOfA := planObj(planMarked(planOrigA), planData("a", "old"), planServerMeta("4"))
	copyOfC := planObj(planMarked(planOrigC), planServerMeta("4"))
	tests := []struct {
		name string
		in   Input
		want bool
	}{
		{name: "a create", in: Input{LocalID: planLocal, Candidates: []Candidate{fromA}}},
		{name: "an update of a copy of the same origin", in: Input{LocalID: planLocal, Candidates: []Candidate{fromA}, Observed: copyOfA}},
		{name: "a copy of another origin that still has it: a conflict", in: Input{LocalID: planLocal, Candidates: []Candidate{fromA}, Observed: copyOfC}},
		{name: "a copy of another origin that is gone: taken over", want: true,
			in: Input{LocalID: planLocal, Candidates: []Candidate{fromA}, Observed: copyOfC, OriginGone: map[types.UID]bool{planOrigC: true}}},
		{name: "a delete", in: Input{LocalID: planLocal, Observed: copyOfC, OriginGone: map[types.UID]bool{planOrigC: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			act := planDecide(t, tt.in)
			if got := TakesOver(act, tt.in.Observed); got != tt.want {
				t.Errorf("TakesOver(%s) = %v, want %v", act.Type, got, tt.want)
			}
		})
	}
}
