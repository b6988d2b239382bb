// Package decoder makes a language model write a plan for a PDDL task:
// it builds the planning prompt, decodes greedily or by sampling, with or
// without the constraint that every action be applicable, and accounts for
// every token.
//
// The constraint itself (which tokens may come next after a partial plan)
// is package constraint, which package mcts uses as a peer.
//
// # Decoding
//
// Decode runs one plan generation on a models.LM: the prompt (BuildPrompt,
// rendered with the model's chat template) is evaluated once, then one token
// per forward pass is chosen by Options.Sampling, masked by the constraint.Space when
// Options.Constrained. Unconstrained output is parsed afterwards, line by
// line, against the task (the first invalid step is reported with the
// validator's reason). Every returned plan is re-validated with
// pddl.Task.Validate.
package decoder
