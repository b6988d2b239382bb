package vocab

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Config is the part of tokenizer_config.json that generation needs.
type Config struct {
	// ChatTemplate is the default Jinja chat template ("" when none). When the
	// file holds a list of named templates, it is the one named "default", or
	// the first.
	ChatTemplate string
	// ChatTemplates holds every named template when the file has a list
	// (e.g. "default", "tool_use"); nil for a single template.
	ChatTemplates map[string]string
	// BOSToken, EOSToken, PadToken and UnkToken are the token spellings
	// ("" when null or absent). Object values ({"content": ...}) are reduced
	// to their content.
	BOSToken, EOSToken, PadToken, UnkToken string
	// AddBOS and AddEOS are add_bos_token and add_eos_token; nil when absent
	// (the tokenizer's post-processor decides).
	AddBOS, AddEOS *bool
	// TokenizerClass is tokenizer_class, e.g. "Qwen2Tokenizer".
	TokenizerClass string
	// AdditionalSpecialTokens lists additional_special_tokens.
	AdditionalSpecialTokens []string
}

// ParseConfig parses the contents of a tokenizer_config.json.
func ParseConfig(data []byte) (*Config, error) {
	var f struct {
		ChatTemplate   json.RawMessage   `json:"chat_template"`
		BOS            json.RawMessage   `json:"bos_token"`
		EOS            json.RawMessage   `json:"eos_token"`
		Pad            json.RawMessage   `json:"pad_token"`
		Unk            json.RawMessage   `json:"unk_token"`
		AddBOS         *bool             `json:"add_bos_token"`
		AddEOS         *bool             `json:"add_eos_token"`
		TokenizerClass string            `json:"tokenizer_class"`
		Additional     []json.RawMessage `json:"additional_special_tokens"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("parse tokenizer_config.json: %w", err)
	}
	c := &Config{AddBOS: f.AddBOS, AddEOS: f.AddEOS, TokenizerClass: f.TokenizerClass}
	var err error
	for _, tk := range []struct {
		name string
		raw  json.RawMessage
		dst  *string
	}{
		{"bos_token", f.BOS, &c.BOSToken},
		{"eos_token", f.EOS, &c.EOSToken},
		{"pad_token", f.Pad, &c.PadToken},
		{"unk_token", f.Unk, &c.UnkToken},
	} {
		if *tk.dst, err = tokenSpelling(tk.raw); err != nil {
			return nil, fmt.Errorf("%s: %w", tk.name, err)
		}
	}
	for i, a := range f.Additional {
		s, err := tokenSpelling(a)
		if err != nil {
			return nil, fmt.Errorf("additional_special_tokens[%d]: %w", i, err)
		}
		c.AdditionalSpecialTokens = append(c.AdditionalSpecialTokens, s)
	}
	raw := bytes.TrimSpace(f.ChatTemplate)
	switch {
	case len(raw) == 0 || string(raw) == "null":
	case raw[0] == '"':
		if err := json.Unmarshal(raw, &c.ChatTemplate); err != nil {
			return nil, fmt.Errorf("chat_template: %w", err)
		}
	case raw[0] == '[':
		var named []struct {
			Name     string `json:"name"`
			Template string `json:"template"`
		}
		if err := json.Unmarshal(raw, &named); err != nil {
			return nil, fmt.Errorf("chat_template: want a string or a list of {name, template}: %w", err)
		}
		c.ChatTemplates = make(map[string]string, len(named))
		for _, n := range named {
			c.ChatTemplates[n.Name] = n.Template
		}
		if t, ok := c.ChatTemplates["default"]; ok {
			c.ChatTemplate = t
		} else if len(named) > 0 {
			c.ChatTemplate = named[0].Template
		}
	default:
		return nil, fmt.Errorf("chat_template: want a string or a list, got %s", truncate(raw))
	}
	return c, nil
}

// tokenSpelling reads a special-token setting: null, a string, or an
// AddedToken-like object with "content".
func tokenSpelling(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
		return "", fmt.Errorf("want a string or {\"content\": ...}, got %s", truncate(raw))
	}
	return *obj.Content, nil
}
