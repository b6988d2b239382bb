package explore

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/nesy-dev/nesy/lexicon"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/pddl"
)

// DefaultMaxFacts bounds the facts a model writes about one observation
// (ModelReaderOptions.MaxFacts).
const DefaultMaxFacts = 8

// NothingMore is the option that ends a model's reading of an observation.
const NothingMore = "nothing more"

// maxNote bounds the list of facts shown with a choice (longer lists are
// left out of the prompt; the constraint still offers every fact).
const maxNote = 2000

// ReaderSystem is the system message of the model's perception dialog.
const ReaderSystem = "You read what an embodied agent in a household observes and write down the facts " +
	"the observation states, one per turn, each exactly as one of the offered facts, then " +
	"\"" + NothingMore + "\" when it states no more."

// ModelReaderOptions configure NewModelReader.
type ModelReaderOptions struct {
	// MaxFacts bounds the facts written per observation; 0 means
	// DefaultMaxFacts.
	MaxFacts int
	// Dialog configures the model's choices.
	Dialog DialogOptions
}

// modelReader is the model's perception step: for each observation, the
// model writes facts one at a time by constrained decoding (Dialog.Choose)
// over the sentences (the lexicon's fact forms) of the fluent facts about
// objects the agent knows, at least one of which this observation
// mentions, until it writes NothingMore or MaxFacts facts. So it can only
// write well-formed facts about real objects. What it writes is read true;
// when it stops by NothingMore, the facts it was offered and did not write
// are read false (it read the observation and found nothing else).
type modelReader struct {
	lm     models.LM
	domain *pddl.Task
	lex    *lexicon.Bound
	names  []nameOf
	opts   ModelReaderOptions
	d      *Dialog
	usage  Usage
	// alf places the agent at ALFWorld's start location, which the text
	// does not name ("the middle of a room"): the domain's static facts
	// give it (the one location without a receptacle), so it is domain
	// knowledge both readers get, not perception (nil for other domains).
	alf *alfReader
}

// NewModelReader returns the model's perception step for an episode of
// domain (the agent's domain model) with lexicon lex.
func NewModelReader(lm models.LM, domain *pddl.Task, lex *lexicon.Bound, opts ModelReaderOptions) (Perceiver, error) {
	if lm == nil {
		return nil, fmt.Errorf("explore: model reader without a model")
	}
	if opts.MaxFacts <= 0 {
		opts.MaxFacts = DefaultMaxFacts
	}
	r := &modelReader{lm: lm, domain: domain, lex: lex, opts: opts}
	if lexicon.Kind(domain.DomainName) == lexicon.ALFWorld {
		r.alf = newALFReader(domain, lex)
	}
	for _, o := range domain.Objects {
		r.names = append(r.names, nameOf{o, lex.Name(o)})
	}
	return r, nil
}

func (r *modelReader) Method() string          { return PerceiveModel }
func (r *modelReader) Covers(pred string) bool { return r.lex.HasFactTemplate(pred) }

func (r *modelReader) Usage() Usage {
	if r.d != nil {
		return r.usage.Add(r.d.Usage())
	}
	return r.usage
}

func (r *modelReader) Close() {
	if r.d != nil {
		r.usage = r.usage.Add(r.d.Usage())
		r.d.Close()
		r.d = nil
	}
}

// candidates returns the sentences the model may write about an
// observation (sorted, distinct) and the fact of each.
func (r *modelReader) candidates(in Input, mentioned map[string]bool) ([]string, []int) {
	bySentence := map[string]int{}
	for id, f := range r.domain.Facts {
		if !r.lex.HasFactTemplate(f.Predicate) {
			continue
		}
		here, ok := false, true
		for _, o := range f.Args {
			if mentioned[o] {
				here = true
			} else if in.Known == nil || !in.Known(o) {
				ok = false
				break
			}
		}
		if ok && here {
			s := r.lex.FactText(f)
			if _, dup := bySentence[s]; !dup && s != NothingMore && !strings.ContainsAny(s, "\n") {
				bySentence[s] = id
			}
		}
	}
	texts := make([]string, 0, len(bySentence))
	for s := range bySentence {
		texts = append(texts, s)
	}
	sort.Strings(texts)
	ids := make([]int, len(texts))
	for i, s := range texts {
		ids[i] = bySentence[s]
	}
	return texts, ids
}

func (r *modelReader) Perceive(ctx context.Context, in Input) (Percept, error) {
	p := newPercept(r.domain)
	mentioned := map[string]bool{}
	for _, n := range r.names {
		if mentions(in.Obs.Text, n.name) {
			mentioned[n.obj] = true
			p.mention(n.obj)
		}
	}
	if r.alf != nil && r.alf.start != "" && alfMiddle.MatchString(in.Obs.Text) {
		r.alf.at(p, r.alf.start)
	}
	texts, ids := r.candidates(in, mentioned)
	if len(texts) == 0 {
		return p.result(), nil
	}
	msg := models.Message{Role: "user", Content: strings.TrimSpace(in.Obs.Text)}
	if in.Image != nil {
		msg.Images = [][]byte{in.Image}
	}
	if r.d == nil {
		d, err := NewDialog(r.lm, []models.Message{{Role: "system", Content: ReaderSystem}, msg}, r.opts.Dialog)
		if err != nil {
			return Percept{}, err
		}
		r.d = d
	} else {
		r.d.Add(msg)
	}
	written := map[int]bool{}
	stopped := false
	for n := 0; n < r.opts.MaxFacts; n++ {
		var opts []string
		var of []int
		for i, s := range texts {
			if !written[i] {
				opts = append(opts, s)
				of = append(of, i)
			}
		}
		opts = append(opts, NothingMore)
		note := "Facts you can write: " + strings.Join(opts, "; ") + "."
		if len(note) > maxNote {
			note = "Write one fact the observation states, or " + NothingMore + "."
		}
		k, err := r.d.ChooseNote(ctx, opts, note)
		if err != nil {
			return Percept{}, fmt.Errorf("explore: perception: %w", err)
		}
		if k == len(opts)-1 {
			stopped = true
			break
		}
		written[of[k]] = true
		r.d.Add(models.Message{Role: "user", Content: "Another fact, or " + NothingMore + "?"})
	}
	for i, id := range ids {
		f := r.domain.Facts[id]
		switch {
		case written[i]:
			p.set(true, f.Predicate, f.Args...)
			p.mention(f.Args...)
		case stopped:
			p.set(false, f.Predicate, f.Args...)
		}
	}
	return p.result(), nil
}

var _ Perceiver = (*modelReader)(nil)
