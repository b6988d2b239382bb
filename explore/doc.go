// Package explore is Phase I of the neurosymbolic agent: task-directed
// exploration of a partially observable environment before planning.
//
// Explore plays an episode with a language model that may only use the
// exploration skills (go to a receptacle, open it, close it, look, and done)
// that are valid in what the agent believes. Each turn the harness computes
// the skills from the belief, never from the hidden state, and the model
// picks one by constrained decoding (Dialog.Choose): an invalid skill cannot
// come out. Facts enter the belief only from observations (the env reports
// which facts the agent sees) and from the effects of interactions the env
// carried out. Exploration stops when the goal is grounded (Ready: in the
// belief's closed-world estimate a plan to the goal exists), when the model
// says done, when nothing is left to learn, or at the step budget.
//
// The result hands Phase II what it plans from:
//
//	Result.Estimate   the belief as a state: facts last seen true; a fact never
//	                  observed is assumed FALSE (closed world: an object not
//	                  seen is not where it might be, a receptacle not seen
//	                  open is closed)
//	Result.Task       the ground task with Init = Estimate and the static
//	                  facts restricted to the objects the agent knows
//	Result.Lexicon    the env's lexicon bound to that task (same texts)
//	Result.Binding    display name -> PDDL instance of every known object
//
// Phase II (package bench with decoder or mcts) plans on Result.Task and the
// plan is executed open-loop in the environment from where exploration left
// it.
//
// # What the agent knows
//
// The harness reads an episode only through the Episode interface: the
// observations, the belief the env derives from them, and the ground task as
// the domain model (facts, actions, static facts, goal). It never reads the
// true state. An object is known to the agent when it has perceived it, an
// observation named it (ALFWorld's first observation names every
// receptacle), it occurs in a fact believed true, or it occurs in no fluent
// fact at all (type constants). Skills name only known objects.
//
// # Skills
//
// Skills are the ground actions of the task's exploration schemas
// (Options.Skills; defaults by domain: ALFWorld's gotolocation, openobject,
// closeobject, look; VirtualHome's walk_towards, walk_into, open, close,
// look_at) applicable in the estimate, whose target (last argument) is
// known. By default only informative skills are offered: going to, or
// opening, a target some of whose facts are still unknown, and while a
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
