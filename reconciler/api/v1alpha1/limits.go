package v1alpha1

// Reasons of the bounds on what a peer answers and on the rules this cluster runs
// (serve's --max-peer-response-bytes, --max-peer-object-bytes,
// --max-peer-membership-objects and --max-rules).
const (
	// ReasonResponseTooLarge: a peer answered one of the rule's watches with a response
	// or an object over the byte limits; the scope is not watched, the copies already
	// made from that peer are kept, and it is tried again, backing off (Degraded).
	ReasonResponseTooLarge = "ResponseTooLarge"
	// ReasonTooManyRules: the rule is past the cap on the rules this cluster runs, in
	// name order; it does not run (Ready False).
	ReasonTooManyRules = "TooManyRules"
	// ReasonMembershipRefused: a peer offered more Clusters or Secrets than the cap, or
	// answered over a byte limit, outside the rules' watches: its membership is not read
	// (its relays are ignored) and it counts as not Ready until it is tried again (a
	// peer Cluster's Ready condition).
	ReasonMembershipRefused = "MembershipRefused"
)
