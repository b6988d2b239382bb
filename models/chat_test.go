package models

import (
	"strings"
	"testing"

	"github.com/nesy-dev/nesy/internal/testenv"
	"github.com/nesy-dev/nesy/vocab"
)

// The expected strings below are what the families' own Jinja templates
// (tokenizer_config.json of the shared tokenizers; gguf.Llama2Template for
// Llama 2) render for the same messages with add_generation_prompt and
// enable_thinking set as in each case; they were checked against
// jinja2 when written.
var (
	chatShort  = []Message{{Role: "user", Content: "Hi"}}
	chatSystem = []Message{{Role: "system", Content: "You plan."}, {Role: "user", Content: " Task: x \n"}}
	chatLong   = []Message{{Role: "system", Content: "S"}, {Role: "user", Content: "a"},
		{Role: "assistant", Content: "<think>\nhmm\n</think>\n\nb"}, {Role: "user", Content: "c"}}
	// Tool results (Gemma 3's template refuses them; they become user
	// turns there).
	chatTool = []Message{{Role: "user", Content: "stack a"}, {Role: "assistant", Content: "call"},
		{Role: "tool", Content: "ok 1"}, {Role: "tool", Content: "ok 2"}, {Role: "user", Content: "next"}}
)

func TestRenderChat(t *testing.T) {
	cases := []struct {
		family string
		msgs   []Message
		think  bool
		want   string
	}{
		{FamilyQwen3, chatShort, false, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"},
		{FamilyQwen3, chatShort, true, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"},
		{FamilyQwen3, chatSystem, false, "<|im_start|>system\nYou plan.<|im_end|>\n<|im_start|>user\n Task: x \n<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"},
		{FamilyQwen3, chatLong, true, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nb<|im_end|>\n<|im_start|>user\nc<|im_end|>\n<|im_start|>assistant\n"},
		{FamilyLlama3, chatShort, false, "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
		{FamilyLlama3, chatSystem, true, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou plan.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nTask: x<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
		{FamilyLlama3, chatLong, false, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|><|start_header_id|>user<|end_header_id|>\n\na<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n<think>\nhmm\n</think>\n\nb<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nc<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
		{FamilyGemma3, chatShort, false, "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"},
		{FamilyGemma3, chatSystem, false, "<bos><start_of_turn>user\nYou plan.\n\nTask: x<end_of_turn>\n<start_of_turn>model\n"},
		{FamilyGemma3, chatLong, true, "<bos><start_of_turn>user\nS\n\na<end_of_turn>\n<start_of_turn>model\n<think>\nhmm\n</think>\n\nb<end_of_turn>\n<start_of_turn>user\nc<end_of_turn>\n<start_of_turn>model\n"},
		{FamilyQwen3, chatTool, true, "<|im_start|>user\nstack a<|im_end|>\n<|im_start|>assistant\ncall<|im_end|>\n<|im_start|>user\n<tool_response>\nok 1\n</tool_response>\n<tool_response>\nok 2\n</tool_response><|im_end|>\n<|im_start|>user\nnext<|im_end|>\n<|im_start|>assistant\n"},
		{FamilyLlama3, chatTool, false, "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nstack a<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\ncall<|eot_id|><|start_header_id|>tool<|end_header_id|>\n\nok 1<|eot_id|><|start_header_id|>tool<|end_header_id|>\n\nok 2<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nnext<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
		{FamilyGemma3, chatTool, false, "<bos><start_of_turn>user\nstack a<end_of_turn>\n<start_of_turn>model\ncall<end_of_turn>\n<start_of_turn>user\nok 1<end_of_turn>\n<start_of_turn>user\nok 2<end_of_turn>\n<start_of_turn>user\nnext<end_of_turn>\n<start_of_turn>model\n"},
		{FamilyLlama2, chatShort, false, "<s>[INST] Hi [/INST]"},
		{FamilyLlama2, chatSystem, false, "<s>[INST] <<SYS>>\nYou plan.\n<</SYS>>\n\n Task: x [/INST]"},
		{FamilyLlama2, chatLong, false, "<s>[INST] <<SYS>>\nS\n<</SYS>>\n\na [/INST] <think>\nhmm\n</think>\n\nb </s><s>[INST] c [/INST]"},
	}
	bos := map[string]string{FamilyLlama3: "<|begin_of_text|>", FamilyGemma3: "<bos>", FamilyLlama2: "<s>"}
	for _, c := range cases {
		r := chatRenderer{family: c.family, thinking: c.family == FamilyQwen3, bos: bos[c.family], eos: "</s>"}
		got, err := r.render(c.msgs, ChatOptions{Think: c.think})
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("%s think=%v %d messages:\n got %q\nwant %q", c.family, c.think, len(c.msgs), got, c.want)
		}
	}
}

func TestRenderChatImages(t *testing.T) {
	msgs := []Message{
		{Role: "user", Content: "What is on the table?", Images: [][]byte{{1}, {2}}},
		{Role: "assistant", Content: "A cup."},
		{Role: "user", Content: "And now?", Images: [][]byte{{3}}},
	}
	if n := len(ChatImages(msgs)); n != 3 {
		t.Fatalf("ChatImages: %d images, want 3", n)
	}
	for _, fam := range []string{FamilyQwen3, FamilyGemma3} {
		vision := chatRenderer{family: fam, vision: true}
		got, _ := vision.render(msgs, ChatOptions{})
		for _, tag := range []string{"[img-0][img-1]What is on the table?", "[img-2]And now?"} {
			if !strings.Contains(got, tag) {
				t.Errorf("%s vision render lacks %q:\n%s", fam, tag, got)
			}
		}
		text := chatRenderer{family: fam}
		if got, _ := text.render(msgs, ChatOptions{}); strings.Contains(got, "[img-") {
			t.Errorf("%s text-only render shows image tags:\n%s", fam, got)
		}
	}
}

// TestChatFamily: the shared tokenizers' templates are recognised.
func TestChatFamily(t *testing.T) {
	for _, fam := range []string{"qwen3", "llama3", "gemma3", "llama2"} {
		t.Run(fam, func(t *testing.T) {
			hf, err := vocab.Load(testenv.Tokenizer(t, fam))
			if err != nil {
				t.Fatal(err)
			}
			template := hf.Config.ChatTemplate
			if fam == "llama2" {
				template = "" // Llama 2's tokenizer_config has none; mkmodel writes gguf.Llama2Template
			}
			tok := &textTokenizer{added: map[string]addedToken{}}
			for _, a := range hf.Added {
				tok.added[a.Content] = addedToken{id: a.ID, control: a.Special}
			}
			got := chatFamily(template, tok)
			want := fam
			if fam == "llama2" {
				want = "" // no template and no chat markup in the vocabulary
			}
			if got != want {
				t.Errorf("chatFamily = %q, want %q", got, want)
			}
		})
	}
}

// zephyrJinja is the Zephyr chat template as Hugging Face models carry it
// (one of the texts Ollama's template index matches): no family nesy
// renders by hand.
const zephyrJinja = "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + message['content'] }}\n{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif %}\n{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}"

// TestChatRendererChoice: a store model's template layer (Ollama's Go
// syntax) wins; a GGUF template of no known family is rendered with the
// closest of Ollama's named templates; a model that matches nothing is an
// error, not a silent "role: content" transcript.
func TestChatRendererChoice(t *testing.T) {
	tok := &textTokenizer{added: map[string]addedToken{}}
	msgs := []Message{{Role: "user", Content: "Hi"}, {Role: "assistant", Content: "Hello"}, {Role: "user", Content: "Plan"}}
	cases := []struct {
		name, jinja, layer string
		want               string // "" means an error
	}{
		{"template layer", "", "{{ range .Messages }}<{{ .Role }}>{{ .Content }}{{ end }}<assistant>", "<user>Hi<assistant>Hello<user>Plan<assistant>"},
		{"layer over a known family", "<|im_start|>", "{{ range .Messages }}[{{ .Content }}]{{ end }}", "[Hi][Hello][Plan]"},
		{"Ollama's named template", zephyrJinja, "", "<|user|>\nHi</s>\n<|assistant|>\nHello</s>\n<|user|>\nPlan</s>\n<|assistant|>\n"},
		{"no template", "", "", ""},
		{"unknown template", strings.Repeat("{% weird %}", 40), "", ""},
		{"bad layer", "", "{{ range }", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := newChatRenderer(c.jinja, c.layer, tok, false)
			if c.want == "" {
				if err == nil {
					got, rerr := r.render(msgs, ChatOptions{})
					t.Fatalf("no error (renders %q, %v)", got, rerr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.render(msgs, ChatOptions{})
			if err != nil || got != c.want {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
}
