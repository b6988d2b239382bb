package models

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ollama/ollama/api"
	ollamatemplate "github.com/ollama/ollama/template"
)

// Chat families RenderChat knows.
const (
	FamilyQwen3  = "qwen3"  // ChatML (Qwen 2/2.5/3/3.5), with Qwen 3's thinking switch
	FamilyLlama3 = "llama3" // Llama 3 header format
	FamilyGemma3 = "gemma3" // Gemma turns (user/model)
	FamilyLlama2 = "llama2" // Llama 2 [INST] format
)

// chatFamily picks the chat format from the GGUF's Jinja template (the
// markup it writes) and, without one, from the vocabulary.
func chatFamily(template string, t *textTokenizer) string {
	has := func(s string) bool { _, ok := t.added[s]; return ok }
	switch {
	case strings.Contains(template, "<|im_start|>"):
		return FamilyQwen3
	case strings.Contains(template, "<|start_header_id|>"):
		return FamilyLlama3
	case strings.Contains(template, "<start_of_turn>"):
		return FamilyGemma3
	case strings.Contains(template, "[INST]"):
		return FamilyLlama2
	case template != "":
		return ""
	case has("<|im_start|>"):
		return FamilyQwen3
	case has("<|start_header_id|>"):
		return FamilyLlama3
	case has("<start_of_turn>"):
		return FamilyGemma3
	}
	return ""
}

// chatRenderer writes chats in one family's format, or with an Ollama
// template.
type chatRenderer struct {
	family   string
	thinking bool // the template has Qwen 3's enable_thinking switch
	vision   bool
	bos, eos string // literal spellings for the formats that write them
	// ollama renders chats when set: an Ollama store model's template
	// layer, or Ollama's named template closest to a GGUF template of no
	// family above.
	ollama *ollamatemplate.Template
}

// newChatRenderer chooses how a model's chats are rendered: with goTemplate
// (Ollama's syntax, from a store model's template layer) when given; else
// by the family of the GGUF's Jinja template (the four families above,
// whose renderings are checked against their Jinja templates); else with
// the Ollama template whose text is closest to the Jinja template
// (Ollama's own matching, template.Named). A model that matches none is an
// error: a plain transcript would silently mislead it.
func newChatRenderer(jinja, goTemplate string, tok *textTokenizer, vision bool) (chatRenderer, error) {
	r := chatRenderer{family: chatFamily(jinja, tok), thinking: strings.Contains(jinja, "enable_thinking"), vision: vision}
	if goTemplate != "" {
		t, err := ollamatemplate.Parse(goTemplate)
		if err != nil {
			return r, fmt.Errorf("the chat template layer does not parse: %w", err)
		}
		r.ollama = t
		return r, nil
	}
	if r.family != "" {
		return r, nil
	}
	if jinja == "" {
		return r, errors.New("the model has no chat template and its vocabulary is none of the chat families nesy knows (ChatML/Qwen, Llama 3, Gemma 3, Llama 2)")
	}
	named, err := ollamatemplate.Named(jinja)
	if err != nil {
		return r, fmt.Errorf("the model's chat template is none of the families nesy knows (ChatML/Qwen, Llama 3, Gemma 3, Llama 2) nor close to one of Ollama's named templates: %w", err)
	}
	t, err := ollamatemplate.Parse(string(named.Bytes))
	if err != nil {
		return r, fmt.Errorf("Ollama's %s template: %w", named.Name, err)
	}
	r.ollama = t
	return r, nil
}

// render implements LM.RenderChat. The formats follow the families' own
// templates for plain chats and tool results (role "tool"; no tool
// definitions or calls): a system message is kept as its own turn (ChatML,
// Llama 3), folded into the first user turn (Gemma 3, Llama 2); contents
// are trimmed where the template trims them. Tool results are Qwen 3's
// <tool_response> blocks in a user turn (consecutive ones share it), a
// "tool" turn in Llama 3, and a user turn in Gemma 3 and Llama 2, whose
// templates have no tool role.
func (r *chatRenderer) render(msgs []Message, opts ChatOptions) (string, error) {
	var sb strings.Builder
	img := 0
	if r.ollama != nil {
		ms := make([]api.Message, len(msgs))
		for i, m := range msgs {
			c := m.Content
			if r.vision {
				for range m.Images {
					c = "[img-" + strconv.Itoa(img) + "]" + c
					img++
				}
			}
			ms[i] = api.Message{Role: m.Role, Content: c}
		}
		if err := r.ollama.Execute(&sb, ollamatemplate.Values{Messages: ms, Think: opts.Think, IsThinkSet: true}); err != nil {
			return "", fmt.Errorf("models: rendering the chat: %w", err)
		}
		return sb.String(), nil
	}
	content := func(m Message) string {
		if !r.vision || len(m.Images) == 0 {
			return m.Content
		}
		var b strings.Builder
		for range m.Images {
			b.WriteString("[img-" + strconv.Itoa(img) + "]")
			img++
		}
		return b.String() + m.Content
	}
	switch r.family {
	case FamilyQwen3:
		for i, m := range msgs {
			c := content(m)
			if m.Role == "tool" {
				if i == 0 || msgs[i-1].Role != "tool" {
					sb.WriteString("<|im_start|>user")
				}
				sb.WriteString("\n<tool_response>\n" + c + "\n</tool_response>")
				if i == len(msgs)-1 || msgs[i+1].Role != "tool" {
					sb.WriteString("<|im_end|>\n")
				}
				continue
			}
			if m.Role == "assistant" {
				// Qwen 3 drops the reasoning of earlier assistant turns.
				if i := strings.LastIndex(c, "</think>"); i >= 0 {
					c = strings.TrimLeft(c[i+len("</think>"):], "\n")
				}
			}
			sb.WriteString("<|im_start|>" + m.Role + "\n" + c + "<|im_end|>\n")
		}
		sb.WriteString("<|im_start|>assistant\n")
		if r.thinking && !opts.Think {
			sb.WriteString("<think>\n\n</think>\n\n")
		}
	case FamilyLlama3:
		sb.WriteString(r.bos)
		for _, m := range msgs {
			sb.WriteString("<|start_header_id|>" + m.Role + "<|end_header_id|>\n\n" + strings.TrimSpace(content(m)) + "<|eot_id|>")
		}
		sb.WriteString("<|start_header_id|>assistant<|end_header_id|>\n\n")
	case FamilyGemma3:
		sb.WriteString(r.bos)
		prefix := ""
		if len(msgs) > 0 && msgs[0].Role == "system" {
			prefix = content(msgs[0]) + "\n\n"
			msgs = msgs[1:]
		}
		for i, m := range msgs {
			role := m.Role
			switch role {
			case "assistant":
				role = "model"
			case "tool":
				role = "user"
			}
			sb.WriteString("<start_of_turn>" + role + "\n")
			if i == 0 {
				sb.WriteString(prefix)
			}
			sb.WriteString(strings.TrimSpace(content(m)) + "<end_of_turn>\n")
		}
		sb.WriteString("<start_of_turn>model\n")
	case FamilyLlama2:
		system := ""
		if len(msgs) > 0 && msgs[0].Role == "system" {
			system = content(msgs[0])
			msgs = msgs[1:]
		}
		for i, m := range msgs {
			c := content(m)
			switch m.Role {
			case "user", "tool":
				if i == 0 && system != "" {
					c = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + c
				}
				sb.WriteString(r.bos + "[INST] " + strings.TrimSpace(c) + " [/INST]")
			case "assistant":
				sb.WriteString(" " + strings.TrimSpace(c) + " " + r.eos)
			}
		}
	default:
		return "", errors.New("models: the model has no chat template nesy can render")
	}
	return sb.String(), nil
}
