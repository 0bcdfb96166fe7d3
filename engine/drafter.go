package engine

import (
	"context"

	"dovetail/engine/tree"
)

// Drafter proposes draft trees for the target to verify.
type Drafter interface {
	// Draft proposes a tree of continuations of ctx: every token so far,
	// the last of which is the root (the target has not run it yet).
	// It may return an empty tree.
	Draft(ctx []int, p tree.Params) (*tree.Tree, error)
	// Accepted reports the end of a round: the tokens the target
	// committed, the root's and then those of the accepted nodes (a chain
	// from a child of the root down), and the target's final hidden state
	// at each (valid only during the call: copy what is kept). A round
	// without a tree commits only the root.
	Accepted(tokens []int, features [][]float32)
	// Reset forgets the sequence.
	Reset()
	// Finish ends the sequence: Generate calls it when it returns, so that
	// a drafter sharing work between sequences (an adapting draft's
	// trainer, its text memory) knows the request is over.
	Finish()
}

// FeatureDrafter is a Drafter that reads the target's final hidden states
// (Dovetail's DGF draft, EAGLE-style): after prefill it is told the
// prompt's tokens and features, and Accepted gives it the features of every
// round. The engine then prefills with ForwardFeatures.
type FeatureDrafter interface {
	Drafter
	Prefilled(prompt []int, features [][]float32)
}

// BranchDrafter is a FeatureDrafter that also learns from the nodes the
// target rejected (Aurora): after Accepted, Verified gives it the round's
// whole verified tree, root first (nodes, parents as indices into nodes,
// −1 for the root), the target's final hidden state at every node (valid
// only during the call) and the indices of the committed path.
type BranchDrafter interface {
	FeatureDrafter
	Verified(nodes, parents []int, features [][]float32, path []int)
}

// Recaller is a Drafter that can also propose a chain of tokens at almost
// no cost (adapt.Drafter: a continuation its text memory
// remembers, without running the draft model). While the planner has
// drafting off, the engine verifies as much of the chain as the planner
// predicts pays instead of a plain decode step. Recall returns a tree
// whose node i is the parent of node i+1, or an empty one.
type Recaller interface {
	Recall(ctx []int, p tree.Params) *tree.Tree
}

// CatchUpper is a Drafter that reads every committed position before it
// drafts (a draft model with a cache of its own). CatchUp runs the
// positions of ctx (as Draft's) it has not read, all but the root's, and
// returns how many it ran. The engine calls it before a drafted round that
// follows rounds without a draft and times it apart: a draft step is what
// the planner weighs a tree level by, and a probe after a hundred plain
// steps would otherwise look like a draft a hundred times slower.
type CatchUpper interface {
	CatchUp(ctx []int) (int, error)
}

// ContextDrafter is a Drafter whose long steps (a draft model reading the
// whole context again after a switch to new weights) end early, with the
// context's error, when the request's context ends: Generate binds each
// request's context before its prefill, so that a cancelled request stops
// within a chunk of them instead of after all.
type ContextDrafter interface {
	BindContext(ctx context.Context)
}
