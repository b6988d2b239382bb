package envs

import (
	_ "embed" // the VirtualHome test split
	"fmt"
	"slices"
	"strings"
)

// VirtualHome's splits (Options.Split, Suite.Split).
const (
	// VirtualHomeTrain is the split nesy train may learn from and settings
	// may be tuned on: every problem not in the test split.
	VirtualHomeTrain = "train"
	// VirtualHomeTest is the evaluation split, written in
	// virtualhome-test.txt: every second problem of each task folder.
	VirtualHomeTest = "test"
)

// virtualHomeTest is virtualhome-test.txt: "folder/id" lines, # comments.
//
//go:embed virtualhome-test.txt
var virtualHomeTest string

// VirtualHomeTestIDs returns the problems of VirtualHome's test split as
// "folder/id" (task type / task ID), in the file's order.
func VirtualHomeTestIDs() []string {
	var ids []string
	for _, l := range strings.Split(virtualHomeTest, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			ids = append(ids, l)
		}
	}
	return ids
}

// Split returns the suite restricted to one of VirtualHome's splits
// (VirtualHomeTrain or VirtualHomeTest). It fails for any other name, for a
// suite that is not VirtualHome's, and when the test split names a problem
// the suite does not have (the dataset and the split disagree).
func (s *Suite) Split(name string) (*Suite, error) {
	if s.name != "virtualhome" {
		return nil, fmt.Errorf("envs: %s has no splits", s.name)
	}
	if !slices.Contains(VirtualHomeSplits, name) {
		return nil, fmt.Errorf("envs: virtualhome has no split %q (known: %s)", name, strings.Join(VirtualHomeSplits, ", "))
	}
	test := map[string]bool{}
	for _, id := range VirtualHomeTestIDs() {
		test[id] = true
	}
	c := *s
	c.tasks = nil
	found := 0
	for _, t := range s.tasks {
		in := test[t.Type+"/"+t.ID]
		if in {
			found++
		}
		if in == (name == VirtualHomeTest) {
			c.tasks = append(c.tasks, t)
		}
	}
	if found != len(test) {
		return nil, fmt.Errorf("envs: virtualhome: the test split names %d problems, %d of them in %d problems of the dataset", len(test), found, len(s.tasks))
	}
	c.split = name
	return &c, nil
}

// SplitName returns the split the suite was restricted to ("" for the
// whole suite).
func (s *Suite) SplitName() string { return s.split }
