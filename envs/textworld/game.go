// Package textworld reads TextWorld PDDL games (the game.tw-pddl files of
// ALFWorld) and derives their text: the command templates of each action and
// the context-sensitive grammar that produces the intro, the task and the
// feedback of every action.
//
// A game file is JSON with the PDDL domain and problem as text and a
// "grammar" document in TextWorld's .twl2 format:
//
//	grammar :: """ {JSON rules} """;
//	action GotoLocation {
//	    template :: "go to [{r.name | receptacleatlocation(r:receptacle, lend:location)}]";
//	    feedback :: "#GotoLocation.feedback#";
//	    grammar :: """ {JSON rules} """;   (optional)
//	}
//
// The rules form a grammar in TextWorld's CSG notation: #symbol# expands the
// first rule of that name whose condition holds, {expr} evaluates a small
// Python-like expression over the entities bound in the context (x.name,
// x.id, x.indefinite, 'literal', +, or), {expr | query} yields expr once for
// every assignment that satisfies the conjunctive query (p(x:t, y:t) &
// not_q(x:t)), and [ {expr | query} ] lists those results with the grammar's
// list_separator / list_last_separator / list_empty rules. Derive follows
// TextWorld's semantics (textworld/envs/pddl/textgen); where this package
// deliberately differs it says so at the place.
package textworld

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Game is a parsed TextWorld PDDL game.
type Game struct {
	// Domain and Problem are the PDDL texts (pddl_domain, pddl_problem).
	Domain, Problem string
	// Solvable is the file's "solvable" flag.
	Solvable bool
	// Grammar holds the text rules of the game.
	Grammar *Grammar
	// Actions are the action text descriptions keyed by lower-cased schema
	// name (TextWorld matches them to PDDL schemas case-insensitively).
	Actions map[string]Action
}

// Action is the text description of one action schema.
type Action struct {
	// Name is the name as written in the grammar (e.g. "GotoLocation").
	Name string
	// Template is the command template in CSG notation, e.g. "take {o} from {r}".
	Template string
	// Feedback is the symbol string derived after the action, e.g.
	// "#PickupObject.feedback#".
	Feedback string
}

// gameJSON is the on-disk layout of a game.tw-pddl file.
type gameJSON struct {
	Domain   *string `json:"pddl_domain"`
	Problem  *string `json:"pddl_problem"`
	Grammar  *string `json:"grammar"`
	Solvable bool    `json:"solvable"`
}

// ParseGame parses the JSON of a game.tw-pddl file. name is used in errors.
func ParseGame(name string, data []byte) (*Game, error) {
	var j gameJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("%s: not a tw-pddl game: %w", name, err)
	}
	switch {
	case j.Domain == nil:
		return nil, fmt.Errorf("%s: tw-pddl game has no pddl_domain", name)
	case j.Problem == nil:
		return nil, fmt.Errorf("%s: tw-pddl game has no pddl_problem", name)
	case j.Grammar == nil:
		return nil, fmt.Errorf("%s: tw-pddl game has no grammar", name)
	}
	g, acts, err := ParseDocument(*j.Grammar)
	if err != nil {
		return nil, fmt.Errorf("%s: grammar: %w", name, err)
	}
	return &Game{Domain: *j.Domain, Problem: *j.Problem, Solvable: j.Solvable, Grammar: g, Actions: acts}, nil
}

// ruleJSON is one alternative of a rule in the grammar's JSON.
type ruleJSON struct {
	RHS       string  `json:"rhs"`
	Condition string  `json:"condition"`
	Weight    float64 `json:"weight"`
}

// ParseDocument parses a .twl2 grammar document: top-level grammar blocks and
// action blocks. Rules of a later block replace rules of the same name from
// an earlier one, as in TextWorld.
func ParseDocument(src string) (*Grammar, map[string]Action, error) {
	s := &scanner{src: src, line: 1}
	raw := map[string][]ruleJSON{}
	actions := map[string]Action{}
	addRules := func(block string, stripComments bool, where string) error {
		if stripComments {
			// TextWorld drops lines starting with '#' from action grammars.
			var kept []string
			for _, ln := range strings.Split(block, "\n") {
				if !strings.HasPrefix(strings.TrimLeft(ln, " \t"), "#") {
					kept = append(kept, ln)
				}
			}
			block = strings.Join(kept, "\n")
		}
		var m map[string][]ruleJSON
		if err := json.Unmarshal([]byte(block), &m); err != nil {
			return fmt.Errorf("%s: rules are not valid JSON: %w", where, err)
		}
		for k, v := range m {
			raw[k] = v
		}
		return nil
	}
	for {
		s.skip()
		if s.eof() {
			break
		}
		line := s.line
		word := s.word()
		switch word {
		case "grammar":
			block, err := s.field(true)
			if err != nil {
				return nil, nil, err
			}
			if err := addRules(block, false, fmt.Sprintf("line %d", line)); err != nil {
				return nil, nil, err
			}
		case "action":
			s.skip()
			name := s.word()
			if name == "" {
				return nil, nil, fmt.Errorf("line %d: action without a name", s.line)
			}
			s.skip()
			if !s.consume("{") {
				return nil, nil, fmt.Errorf("line %d: expected '{' after action %s", s.line, name)
			}
			act := Action{Name: name}
			for {
				s.skip()
				if s.consume("}") {
					break
				}
				if s.eof() {
					return nil, nil, fmt.Errorf("line %d: action %s is not closed", line, name)
				}
				fline := s.line
				key := s.word()
				switch key {
				case "template", "feedback":
					v, err := s.field(false)
					if err != nil {
						return nil, nil, err
					}
					if key == "template" {
						act.Template = v
					} else {
						act.Feedback = v
					}
				case "grammar", "pddl":
					v, err := s.field(true)
					if err != nil {
						return nil, nil, err
					}
					if key == "grammar" {
						if err := addRules(v, true, fmt.Sprintf("line %d (action %s)", fline, name)); err != nil {
							return nil, nil, err
						}
					}
				default:
					return nil, nil, fmt.Errorf("line %d: unexpected %q in action %s", fline, key, name)
				}
			}
			if act.Template == "" {
				return nil, nil, fmt.Errorf("line %d: action %s has no template", line, name)
			}
			actions[strings.ToLower(name)] = act
		default:
			return nil, nil, fmt.Errorf("line %d: expected 'grammar' or 'action', found %q", line, word)
		}
	}
	g := &Grammar{rules: map[string][]*rule{}, native: map[string]NativeRule{}}
	names := make([]string, 0, len(raw))
	for k := range raw {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		for i, r := range raw[name] {
			rhs, err := parseSymbols(r.RHS)
			if err != nil {
				return nil, nil, fmt.Errorf("rule %q alternative %d: %w", name, i+1, err)
			}
			var cond *Query
			if strings.TrimSpace(r.Condition) != "" {
				cond, err = ParseQuery(r.Condition)
				if err != nil {
					return nil, nil, fmt.Errorf("rule %q alternative %d condition: %w", name, i+1, err)
				}
			}
			g.rules[name] = append(g.rules[name], &rule{rhs: rhs, cond: cond})
		}
	}
	return g, actions, nil
}

// scanner tokenizes the .twl2 document: words, "strings", """blocks""",
// ':: ' and ';', with '#' comments to the end of a line between tokens.
type scanner struct {
	src  string
	pos  int
	line int
}

func (s *scanner) eof() bool { return s.pos >= len(s.src) }

func (s *scanner) skip() {
	for !s.eof() {
		c := s.src[s.pos]
		switch {
		case c == '\n':
			s.line++
			s.pos++
		case c == ' ' || c == '\t' || c == '\r':
			s.pos++
		case c == '#':
			for !s.eof() && s.src[s.pos] != '\n' {
				s.pos++
			}
		default:
			return
		}
	}
}

func (s *scanner) word() string {
	start := s.pos
	for !s.eof() {
		c := s.src[s.pos]
		if c == '_' || c == '-' || c == '/' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			s.pos++
			continue
		}
		break
	}
	return s.src[start:s.pos]
}

func (s *scanner) consume(tok string) bool {
	if strings.HasPrefix(s.src[s.pos:], tok) {
		s.line += strings.Count(tok, "\n")
		s.pos += len(tok)
		return true
	}
	return false
}

// field reads ':: value ;' where value is a "string" or, when block is true,
// a """block""" (a plain string is accepted there too).
func (s *scanner) field(block bool) (string, error) {
	s.skip()
	if !s.consume("::") {
		return "", fmt.Errorf("line %d: expected '::'", s.line)
	}
	s.skip()
	var v string
	switch {
	case strings.HasPrefix(s.src[s.pos:], `"""`):
		if !block {
			return "", fmt.Errorf(`line %d: unexpected """ block`, s.line)
		}
		s.pos += 3
		end := strings.Index(s.src[s.pos:], `"""`)
		if end < 0 {
			return "", fmt.Errorf(`line %d: unterminated """ block`, s.line)
		}
		v = s.src[s.pos : s.pos+end]
		s.line += strings.Count(v, "\n")
		s.pos += end + 3
	case strings.HasPrefix(s.src[s.pos:], `"`):
		s.pos++
		end := strings.IndexByte(s.src[s.pos:], '"')
		if end < 0 {
			return "", fmt.Errorf("line %d: unterminated string", s.line)
		}
		v = s.src[s.pos : s.pos+end]
		s.line += strings.Count(v, "\n")
		s.pos += end + 1
	default:
		return "", fmt.Errorf("line %d: expected a string", s.line)
	}
	s.skip()
	if !s.consume(";") {
		return "", fmt.Errorf("line %d: expected ';'", s.line)
	}
	return v, nil
}
