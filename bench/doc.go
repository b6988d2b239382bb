// Package bench runs suites of environment tasks with a planning method and
// a model, and reports success, cost and where failures come from.
//
// # A run
//
// Run takes a Config (environment, suite, method, mode, model, output
// folder, budgets) and, for every selected task that the output folder's
// tasks.jsonl does not hold yet:
//
//   - two-phase mode: explores with package explore (Phase I) and, when the
//     goal is grounded, plans from the grounded estimate (explore.Result.Task);
//     true-state mode: plans from the true initial state;
//   - plans with the method: "greedy"/"cgreedy" (package decoder,
//     unconstrained/constrained greedy decoding), "mcts"/"cmcts" (package
//     mcts, unconstrained/constrained token search, the paper's settings:
//     width 16, c = 2.5, base 10, early stop at a goal plan), "thinking"
//     (Qwen's thinking mode, then unconstrained greedy); or "direct", the
//     direct policy (one free command per turn with the environment's
//     feedback, no planning);
//   - executes the plan open-loop in the environment and judges success by
//     the environment's true state;
//   - appends the task's Record to tasks.jsonl (one JSON line, written whole
//     and synced), so an interrupted run resumes where it stopped.
//
// Then WriteReport writes summary.json (Summary), report.md (a table in the
// layout of the paper's Table 2, method x environment, per-type success,
// failure stages, cost), its HTML twin report.html (plots inline) and the
// plots success.svg and tokens.svg. Runs can be split with Shard (i/n)
// across machines; WriteTable combines several
// run folders into one Table 2 with a success-per-method plot; Compare
// tests two runs against each other (McNemar's exact test, task-cluster
// bootstrap interval).
//
// # Failure stages
//
// A failed task is attributed to the first stage that went wrong:
// exploration/representation (Phase I did not ground the goal, or a plan
// valid in the grounded state was refused by the environment: the estimate
// was wrong), grounding/semantics (the model wrote a step that is not an
// applicable action, or a direct policy issued commands the environment
// rejected), goal not reached (every step executed, the goal does not
// hold), or error (the task could not be run; Record.Error says why).
//
// # Counting
//
// Prompt tokens are the tokens the model read (each once), generated tokens
// those it wrote into the plan or its commands (thinking counted apart),
// evaluated tokens every position any forward pass computed (search and
// exploration included), model calls the Eval calls, images those a vision
// model saw. Seconds are wall time per task, model loading excluded.
package bench
