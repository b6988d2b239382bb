// Package explore is Phase I of the neurosymbolic agent: task-directed
// exploration of a partially observable environment before planning.
//
// Explore plays the agent's side of an episode (Episode; envs.Agent):
// commands go in, text (and, where the environment renders one, an image)
// comes out. It never sees the environment's facts or true state. Each turn
// the harness computes the exploration skills (go to a receptacle, open it,
// close it, look, and done) that are valid in what the agent believes, and
// the model picks one by constrained decoding (Dialog.Choose): an invalid
// skill cannot come out. Exploration stops when the goal is grounded
// (Ready: in the belief's closed-world estimate a plan to the goal exists),
// when the model says done, when nothing is left to learn, or at the step
// budget.
//
// # Perception
//
// Facts enter the belief only through a perception step (Perceiver), which
// reads each observation, and from the effects (by the domain model) of the
// commands the text says were carried out. Two perceivers:
//
//	NewTextReader   the deterministic reader of the environment's text:
//	                ALFWorld's feedback templates (TextWorld's grammar in
//	                game.tw-pddl), or the lexicon's fact sentences
//	                (VirtualHome, Blocksworld). The baseline.
//	NewModelReader  the model reads the observation and writes facts one at
//	                a time by constrained choice over the sentences of the
//	                fluent facts about objects it knows and the observation
//	                mentions (the trie machinery of actions): it can only
//	                write well-formed facts about real objects.
//
// Options.Perception picks one; Options.Perceiver supplies any other.
// Compare scores what was perceived against the hidden truth (precision
// and recall, on the goal's objects and on all facts); the harness itself
// never sees the truth.
//
// The result hands Phase II what it plans from:
//
//	Result.Estimate   the belief as a state: facts last seen true; a fact never
//	                  observed is assumed FALSE (closed world: an object not
//	                  seen is not where it might be, a receptacle not seen
//	                  open is closed)
//	Result.Task       the ground task restricted to what the agent knows:
//	                  the actions over known objects only (so no plan and no
//	                  prompt names an object the agent has not perceived),
//	                  static facts about known objects, Init = Estimate
//	Result.Lexicon    the env's lexicon bound to that task (same texts)
//	Result.Binding    display name -> PDDL instance of every known object
//
// Phase II (package bench with decoder or mcts) plans on Result.Task and the
// plan is executed open-loop in the environment from where exploration left
// it.
//
// # What the agent knows
//
// An object is known to the agent when its perception wrote a fact about it
// or said the observation mentions it, an observation or the goal names it
// (ALFWorld's first observation names every receptacle), it occurs in a
// fact believed true, or it occurs in no fluent fact at all (type
// constants). Objects no command names (ALFWorld's locations) are implicit
// in the commands that name their receptacles. Skills name only known
// objects.
//
// # Skills
//
// Skills are the ground actions of the task's exploration schemas
// (Options.Skills; defaults by domain: ALFWorld's gotolocation, openobject,
// closeobject, look; VirtualHome's walk_towards, walk_into, open, close,
// look_at) applicable in the estimate, whose target (last argument) is
// known. By default only informative skills are offered: going to, or
// opening, a target some of whose facts (of the predicates the perceiver
// can write) are still unknown, and while a
// closed receptacle with unknown contents is at hand, only opening it. So a
// model, even a random one, cannot waste steps or loop, and every step
// inspects something new. Options.AllSkills offers every valid skill.
// "done" is offered once the goal is grounded when Options.ModelStops lets
// the model decide when to stop; otherwise the harness stops at Ready.
//
// # Images
//
// Where the environment renders the agent's view (Options.Images, from
// envs.Capabilities), every observation's image is attached to its message
// as PNG. A vision model sees it; a text-only model's chat template leaves it
// out and the text stands alone. Result.ImagesRendered counts the images
// attached, Usage.Images the images the model saw.
package explore
