package pddl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
)

// TWGame is an ALFWorld game.tw-pddl file: a JSON object holding the PDDL
// domain and problem of one task, the TextWorld grammar (command and feedback
// templates, itself JSON text) and whether the task is solvable.
type TWGame struct {
	Domain   string `json:"pddl_domain"`
	Problem  string `json:"pddl_problem"`
	Grammar  string `json:"grammar"`
	Solvable bool   `json:"solvable"`
}

// ParseTWGame decodes a game.tw-pddl file. The filename is used in errors.
func ParseTWGame(filename string, src []byte) (*TWGame, error) {
	var g TWGame
	if err := json.Unmarshal(src, &g); err != nil {
		return nil, fmt.Errorf("%s: not a tw-pddl JSON file: %w", filename, err)
	}
	if g.Problem == "" {
		return nil, fmt.Errorf("%s: tw-pddl file has no pddl_problem", filename)
	}
	return &g, nil
}

// LoadTWGame reads and decodes a game.tw-pddl file.
func LoadTWGame(path string) (*TWGame, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseTWGame(path, src)
}

// isJSON reports whether src looks like a JSON object rather than PDDL.
func isJSON(src []byte) bool {
	src = bytes.TrimLeft(src, " \t\r\n\ufeff")
	return len(src) > 0 && src[0] == '{'
}

// LoadFiles reads, parses and grounds a domain and a problem. problemPath
// may be an ALFWorld game.tw-pddl JSON file; its embedded domain is used when
// domainPath is "" (positions in errors then name "FILE[pddl_domain]" or
// "FILE[pddl_problem]" and count lines inside the embedded text).
func LoadFiles(domainPath, problemPath string) (*Task, []Warning, error) {
	return LoadFilesLimits(domainPath, problemPath, GroundLimits{})
}

// LoadFilesLimits is LoadFiles grounding within lim (and with its
// CompileBound).
func LoadFilesLimits(domainPath, problemPath string, lim GroundLimits) (*Task, []Warning, error) {
	d, p, warns, err := LoadLifted(domainPath, problemPath)
	if err != nil {
		return nil, warns, err
	}
	t, w, err := GroundContext(context.Background(), d, p, lim)
	warns = append(warns, w...)
	return t, warns, err
}

// LoadLifted is LoadFiles without grounding: it returns the parsed domain
// and problem.
func LoadLifted(domainPath, problemPath string) (*Domain, *Problem, []Warning, error) {
	psrc, err := os.ReadFile(problemPath)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("reading problem: %w", err)
	}
	probName := problemPath
	var dsrc []byte
	domName := domainPath
	if isJSON(psrc) {
		g, err := ParseTWGame(problemPath, psrc)
		if err != nil {
			return nil, nil, nil, err
		}
		psrc, probName = []byte(g.Problem), problemPath+"[pddl_problem]"
		if domainPath == "" {
			if g.Domain == "" {
				return nil, nil, nil, fmt.Errorf("%s: tw-pddl file has no pddl_domain and no domain file was given", problemPath)
			}
			dsrc, domName = []byte(g.Domain), problemPath+"[pddl_domain]"
		}
	} else if domainPath == "" {
		return nil, nil, nil, fmt.Errorf("no domain file given for %s (only a game.tw-pddl problem carries its own domain)", problemPath)
	}
	if dsrc == nil {
		dsrc, err = os.ReadFile(domainPath)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("reading domain: %w", err)
		}
	}
	d, warns, err := ParseDomain(domName, dsrc)
	if err != nil {
		return nil, nil, warns, err
	}
	p, w, err := ParseProblem(probName, psrc)
	warns = append(warns, w...)
	if err != nil {
		return nil, nil, warns, err
	}
	return d, p, warns, nil
}
