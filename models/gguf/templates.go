package gguf

// Llama2Template is the Llama 2 chat format as a Jinja template: the
// system prompt folded into the first user turn between <<SYS>> markers,
// each user turn as "<s>[INST] ... [/INST]", each answer followed by "</s>".
const Llama2Template = `{%- if messages[0]['role'] == 'system' -%}
{%- set system = messages[0]['content'] -%}{%- set turns = messages[1:] -%}
{%- else -%}{%- set system = '' -%}{%- set turns = messages -%}{%- endif -%}
{%- for m in turns -%}
{%- if m['role'] == 'user' -%}
{%- if loop.first and system -%}{%- set text = '<<SYS>>\n' + system + '\n<</SYS>>\n\n' + m['content'] -%}{%- else -%}{%- set text = m['content'] -%}{%- endif -%}
{{ bos_token + '[INST] ' + text | trim + ' [/INST]' }}
{%- elif m['role'] == 'assistant' -%}
{{ ' ' + m['content'] | trim + ' ' + eos_token }}
{%- endif -%}
{%- endfor -%}`

// ChatMLTemplate is Qwen's ChatML format as a Jinja template, with Qwen 3's
// thinking switch: when enable_thinking is false the assistant turn opens
// with an empty think block.
const ChatMLTemplate = `{%- for m in messages -%}
{{- '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\n' -}}
{%- if enable_thinking is defined and enable_thinking is false -%}{{- '<think>\n\n</think>\n\n' -}}{%- endif -%}
{%- endif -%}`

// GemmaTemplate is Gemma 3's chat format as a Jinja template: a system
// message is folded into the first user turn, the assistant is "model".
const GemmaTemplate = `{{- bos_token -}}
{%- if messages[0]['role'] == 'system' -%}
{%- set prefix = messages[0]['content'] + '\n\n' -%}{%- set turns = messages[1:] -%}
{%- else -%}{%- set prefix = '' -%}{%- set turns = messages -%}{%- endif -%}
{%- for m in turns -%}
{%- set role = 'model' if m['role'] == 'assistant' else m['role'] -%}
{{- '<start_of_turn>' + role + '\n' + (prefix if loop.first else '') + m['content'] | trim + '<end_of_turn>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<start_of_turn>model\n' -}}{%- endif -%}`

// corpus is the text the synthetic vocabularies are learned from: the kind
// of text nesy prompts and plans contain.
const corpus = `You are a helpful assistant that writes plans for a household robot.
You are in the middle of a room. Looking quickly around you, you see a cabinet 1, a countertop 1, a drawer 1, a fridge 1, a microwave 1, a sinkbasin 1, a stoveburner 1, a toaster 1 and a garbagecan 1.
Your task is to: put a clean apple in the fridge.
Your task is to: heat some egg and put it in the countertop.
Your task is to: cool a mug and put it in the cabinet.
Your task is to: examine the book with the desklamp.
Your task is to: put two pencils in the drawer.
Write the plan, one action per line. When the goal is reached, stop.
go to countertop 1
take apple 1 from countertop 1
go to sinkbasin 1
clean apple 1 with sinkbasin 1
go to fridge 1
open fridge 1
put apple 1 in/on fridge 1
close fridge 1
go to microwave 1
heat egg 1 with microwave 1
cool mug 1 with fridge 1
use desklamp 1
go to drawer 2
open drawer 2
take pencil 2 from drawer 2
put pencil 2 in/on drawer 1
Observation: You arrive at countertop 1. On the countertop 1, you see an apple 1, a knife 1 and a plate 2.
Observation: You pick up the apple 1 from the countertop 1.
Observation: Nothing happens.
The goal is reached.
(define (domain blocksworld) (:requirements :strips) (:predicates (on ?x ?y) (ontable ?x) (clear ?x) (handempty) (holding ?x)))
(:action pick-up :parameters (?x) :precondition (and (clear ?x) (ontable ?x) (handempty)) :effect (and (holding ?x)))
(pick-up a)
(unstack b a)
(stack a b)
(put-down c)
pick-up a
unstack c b
stack b c
put-down d
As initial conditions I have that, the red block is clear, the blue block is clear, the hand is empty, the red block is on top of the yellow block and the blue block is on the table.
My goal is to have that the red block is on top of the blue block.
My plan is as follows:
[PLAN]
unstack the red block from on top of the yellow block
put down the red block
pick up the blue block
stack the blue block on top of the red block
[PLAN END]
The state is: (at robot room1) (holding cup) (open door2). The goal is: (and (at cup kitchen) (clean cup)).
walk to the kitchen, find the cup, grab the cup, switch on the faucet, wash the cup, put the cup on the table.
Step 1: walk to kitchen. Step 2: find cup. Step 3: grab cup. Step 4: wash cup. Step 5: put cup on table.
The numbers are 0 1 2 3 4 5 6 7 8 9 10 11 12 20 42 100 250 1000 2026.
Think step by step, then answer with the plan only. Do not explain.`
