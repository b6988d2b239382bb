package trie

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"
)

// cpuMeter reports the benchmark goroutine's thread CPU time per op as
// "cpu-ns/op" (see threadCPU).
type cpuMeter struct{ start time.Duration }

func startCPU() cpuMeter {
	runtime.LockOSThread()
	t, _ := threadCPU()
	return cpuMeter{t}
}

func (m cpuMeter) report(b *testing.B) {
	t, ok := threadCPU()
	runtime.UnlockOSThread()
	if ok && b.N > 0 {
		b.ReportMetric(float64((t-m.start).Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

// kitchenState returns the applicable action strings of an ALFWorld-sized
// kitchen state (about 250 actions, as grounded ALFWorld states have
// hundreds): go to / examine every receptacle, open and close the openable
// ones, take and examine every object from where it lies, put the held
// object in or on every receptacle, and the appliance actions. Seeds vary the counts and which objects lie where.
func kitchenState(r *rand.Rand) []string {
	type recep struct {
		name     string
		n        int
		openable bool
		prep     string
	}
	receps := []recep{
		{"cabinet", 12 + r.IntN(9), true, "in"}, {"drawer", 6 + r.IntN(7), true, "in"},
		{"countertop", 1 + r.IntN(3), false, "on"}, {"shelf", 1 + r.IntN(3), false, "on"},
		{"stoveburner", 4, false, "on"}, {"fridge", 1, true, "in"}, {"microwave", 1, true, "in"},
		{"sinkbasin", 1, false, "in"}, {"garbagecan", 1, false, "in"}, {"coffeemachine", 1, false, "on"},
		{"toaster", 1, false, "on"}, {"diningtable", 1, false, "on"},
	}
	objects := []string{"apple", "mug", "knife", "butterknife", "spatula", "potato", "tomato", "lettuce", "egg",
		"bread", "cup", "plate", "bowl", "pan", "pot", "kettle", "fork", "spoon", "saltshaker", "peppershaker",
		"soapbottle", "dishsponge", "winebottle", "glassbottle", "ladle"}
	var names []string
	for _, rc := range receps {
		for i := 1; i <= rc.n; i++ {
			names = append(names, fmt.Sprintf("%s %d", rc.name, i))
		}
	}
	var acts []string
	held := fmt.Sprintf("%s %d", objects[r.IntN(len(objects))], 1+r.IntN(3))
	for _, name := range names {
		acts = append(acts, "go to "+name, "examine "+name)
		rc := receps[0]
		for _, c := range receps {
			if len(name) > len(c.name) && name[:len(c.name)+1] == c.name+" " {
				rc = c
			}
		}
		if rc.openable {
			acts = append(acts, "open "+name, "close "+name)
		}
		acts = append(acts, fmt.Sprintf("put %s %s %s", held, rc.prep, name))
		for k := r.IntN(3); k > 0; k-- { // objects lying here
			obj := fmt.Sprintf("%s %d", objects[r.IntN(len(objects))], 1+r.IntN(3))
			acts = append(acts, fmt.Sprintf("take %s from %s", obj, name), "examine "+obj)
		}
	}
	acts = append(acts, "heat "+held+" with microwave 1", "cool "+held+" with fridge 1",
		"clean "+held+" with sinkbasin 1", "slice "+held+" with knife 1", "inventory", "look", "use desklamp 1")
	return acts
}

// benchVocab loads a real vocabulary once per benchmark binary run.
func benchVocab(b *testing.B, family string) (vocabulary, *Index) {
	b.Helper()
	v := loadReal(b, family)
	x := newIndexT(b, v)
	return v, x
}

// BenchmarkNewIndex measures building the vocabulary index of a real model
// (once per model, at load time).
func BenchmarkNewIndex(b *testing.B) {
	for _, family := range []string{"qwen3", "gemma3"} {
		b.Run(family, func(b *testing.B) {
			v := loadReal(b, family)
			var x *Index
			runtime.GC()
			cpu := startCPU()
			for b.Loop() {
				var err error
				if x, err = NewIndex(v.text, v.special, IndexOptions{EndTokens: v.end}); err != nil {
					b.Fatal(err)
				}
			}
			cpu.report(b)
			b.ReportMetric(float64(x.Nodes()), "nodes")
			b.ReportMetric(float64(x.TextTokens()), "tokens")
		})
	}
}

// BenchmarkNewActionTrie measures building one state's action trie (once
// per state; a Cache avoids repeats).
func BenchmarkNewActionTrie(b *testing.B) {
	r := rand.New(rand.NewPCG(11, 12))
	states := make([][]string, 16)
	n := 0
	for i := range states {
		states[i] = kitchenState(r)
		n += len(states[i])
	}
	i := 0
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		if _, err := NewActionTrie(Spec{Actions: states[i%len(states)], EndAllowed: true}); err != nil {
			b.Fatal(err)
		}
		i++
	}
	cpu.report(b)
	b.ReportMetric(float64(n)/float64(len(states)), "actions/state")
}

// BenchmarkAllowed measures Index.Allowed per decoding step on real
// vocabularies and ALFWorld-sized states. It decodes random actions token
// by token (mostly the longest allowed token, as a model's usual
// tokenization would, sometimes a random one), starting a new action at
// every completion, and times every call; it reports the median, p99 and
// maximum per call and the mean allowed-set size. The "root" variant times
// only the first step of an action, the largest set.
func BenchmarkAllowed(b *testing.B) {
	for _, family := range []string{"qwen3", "gemma3"} {
		v, x := benchVocab(b, family)
		r := rand.New(rand.NewPCG(13, 14))
		var tries []*ActionTrie
		for i := 0; i < 32; i++ {
			at, err := NewActionTrie(Spec{Actions: kitchenState(r), EndAllowed: true, End: "\n"})
			if err != nil {
				b.Fatal(err)
			}
			tries = append(tries, at)
		}
		for _, rootOnly := range []bool{false, true} {
			name := family + "/step"
			if rootOnly {
				name = family + "/root"
			}
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				var set Set
				times := make([]time.Duration, 0, 1<<16)
				sizes := 0
				at, node := tries[0], Root
				for b.Loop() {
					t0 := time.Now()
					x.Allowed(at, node, &set)
					d := time.Since(t0)
					if len(times) < cap(times) {
						times = append(times, d)
					}
					sizes += set.Len()
					node = pickNext(r, v, at, &set)
					if rootOnly || node == Root {
						at, node = tries[r.IntN(len(tries))], Root
					}
				}
				slices.Sort(times)
				b.ReportMetric(float64(times[len(times)/2].Nanoseconds()), "median-ns")
				b.ReportMetric(float64(times[len(times)*99/100].Nanoseconds()), "p99-ns")
				b.ReportMetric(float64(times[len(times)-1].Nanoseconds()), "max-ns")
				b.ReportMetric(float64(sizes)/float64(b.N), "allowed/call")
			})
		}
	}
}

// pickNext chooses an allowed token and returns the node to continue from:
// Root when the step ended.
func pickNext(r *rand.Rand, v vocabulary, at *ActionTrie, set *Set) Node {
	if set.Len() == 0 {
		return Root
	}
	i := r.IntN(set.Len())
	if r.IntN(4) != 0 { // the longest text token
		best := -1
		for j, id := range set.IDs {
			if set.Next[j] != EndToken && (best < 0 || len(v.text[id]) > len(v.text[set.IDs[best]])) {
				best = j
			}
		}
		if best >= 0 {
			i = best
		}
	}
	n := set.Next[i]
	if n == EndToken || at.IsLeaf(n) {
		return Root
	}
	return n
}
