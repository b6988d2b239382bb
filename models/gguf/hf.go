package gguf

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/nesy-dev/nesy/vocab"
)

// FromHF builds a GGUF vocabulary from a Hugging Face tokenizer.json (and
// the tokenizer_config.json beside it, for special tokens and the chat
// template), so a random-weight model tokenizes exactly as the real model
// does. Byte-level BPE vocabularies (Qwen, Llama 3) keep their merges and
// pre-tokenizer; SentencePiece-style ones (Llama 2, Gemma) get scores that
// make a score-ordered SentencePiece encoder apply the merges in rank
// order: a piece scores minus the rank of the first merge that makes it.
func FromHF(path string) (*Tokenizer, error) {
	hf, err := vocab.Load(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	return fromVocab(hf, path)
}

func fromVocab(hf *vocab.Tokenizer, path string) (*Tokenizer, error) {
	t := &Tokenizer{Model: hf.GGUFModel(), BOS: -1, EOT: -1, PAD: -1}
	switch t.Model {
	case ModelBPE, ModelSentencePiece:
	default:
		return nil, fmt.Errorf("gguf: %s: %s tokenizer with %s decoding is not supported (byte-level BPE or SentencePiece-style BPE)", path, hf.Model, hf.Decoding)
	}
	if hf.Model != "BPE" {
		return nil, fmt.Errorf("gguf: %s: model type %s is not supported (BPE only)", path, hf.Model)
	}
	types := hf.Types()
	t.Tokens = make([]string, len(hf.Tokens))
	t.Types = make([]int32, len(hf.Tokens))
	for id, s := range hf.Tokens {
		t.Types[id] = int32(types[id])
		if types[id] == vocab.TypeUnused || s == "" {
			s = "[PAD" + strconv.Itoa(id) + "]"
			t.Types[id] = TypeUnused
		}
		t.Tokens[id] = s
	}
	if t.Model == ModelBPE {
		t.Pre = hf.GGUFPre()
		if t.Pre == "default" && hf.SplitPattern() != "" {
			return nil, fmt.Errorf("gguf: %s: unknown pre-tokenizer pattern %q (known: qwen2, llama-bpe)", path, hf.SplitPattern())
		}
		t.Merges = make([]string, len(hf.Merges))
		for i, m := range hf.Merges {
			if strings.Contains(m.A, " ") || strings.Contains(m.B, " ") {
				return nil, fmt.Errorf("gguf: %s: merge %d (%q, %q) contains a space", path, i, m.A, m.B)
			}
			t.Merges[i] = m.A + " " + m.B
		}
	} else {
		first := make(map[string]int, len(hf.Merges))
		for i, m := range hf.Merges {
			if _, ok := first[m.A+m.B]; !ok {
				first[m.A+m.B] = i
			}
		}
		t.Scores = make([]float32, len(t.Tokens))
		for id, s := range t.Tokens {
			if r, ok := first[s]; ok {
				t.Scores[id] = -float32(r + 1)
			} else if len([]rune(s)) > 1 && t.Types[id] == TypeNormal {
				t.Scores[id] = -1e9 // never made by a merge: last resort
			}
		}
		for _, st := range hf.Normalizer {
			if st.Type == "Prepend" && st.Content == "▁" {
				t.AddSpacePrefix = true
			}
		}
		for _, st := range append(hf.Normalizer, hf.PreTokenizer...) {
			if st.Type == "Metaspace" && st.PrependScheme != "never" {
				t.AddSpacePrefix = true
			}
		}
	}
	id := func(s string) int32 {
		if s == "" {
			return -1
		}
		if i, ok := hf.ID(s); ok {
			return i
		}
		return -1
	}
	control := func(s string) (int32, bool) {
		i := id(s)
		return i, i >= 0 && t.Types[i] == TypeControl
	}
	cfg := hf.Config
	if cfg == nil {
		cfg = &vocab.Config{}
	}
	t.BOS, t.EOS, t.PAD = id(cfg.BOSToken), id(cfg.EOSToken), id(cfg.PadToken)
	switch {
	case cfg.AddBOS != nil:
		t.AddBOS = *cfg.AddBOS && t.BOS >= 0
	default:
		t.AddBOS = t.BOS >= 0 && (t.Model == ModelSentencePiece || strings.Contains(string(hf.PostProcessorJSON), cfg.BOSToken))
	}
	for _, s := range []string{"<|im_end|>", "<|eot_id|>", "<end_of_turn>"} {
		if i, ok := control(s); ok {
			t.EOT = i
			break
		}
	}
	for _, s := range []string{"<|endoftext|>", "<|end_of_text|>", "<|eom_id|>", "<eos>", "</s>"} {
		if i, ok := control(s); ok && i != t.EOS && i != t.EOT {
			t.Stop = append(t.Stop, i)
		}
	}
	if t.EOS < 0 {
		switch {
		case t.EOT >= 0:
			t.EOS = t.EOT
		case len(t.Stop) > 0:
			t.EOS, t.Stop = t.Stop[0], t.Stop[1:]
		default:
			return nil, fmt.Errorf("gguf: %s: no end-of-sequence token (eos_token in tokenizer_config.json)", path)
		}
	}
	t.ChatTemplate = cfg.ChatTemplate
	if t.ChatTemplate == "" {
		switch _, chatml := hf.ID("<|im_start|>"); {
		case chatml:
			t.ChatTemplate = ChatMLTemplate
		case t.Model == ModelSentencePiece:
			t.ChatTemplate = Llama2Template
		}
	}
	if err := t.validate(); err != nil {
		return nil, fmt.Errorf("%w (%s)", err, path)
	}
	return t, nil
}
