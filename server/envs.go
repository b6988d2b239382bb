package server

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/nesy-dev/nesy/envs"
)

// envCache opens environments by name once (reading a suite's task list)
// and hands out episodes of their tasks.
type envCache struct {
	datasets string

	mu   sync.Mutex // protects envs
	envs map[string]envs.Env
}

func newEnvCache(datasets string) *envCache {
	return &envCache{datasets: datasets, envs: map[string]envs.Env{}}
}

// hidePath replaces path (a server folder or file) in an error message by
// what the client knows it as: messages never carry absolute server paths.
func hidePath(msg, path, as string) string {
	if path == "" {
		return msg
	}
	return strings.ReplaceAll(msg, path, as)
}

func (c *envCache) open(ctx context.Context, name, task string) (*envs.Episode, error) {
	name = strings.ToLower(name)
	if !slices.Contains(envs.Names(), name) {
		return nil, errorf(http.StatusNotFound, CodeUnknownEnv, "unknown environment %q (want one of %s)", name, strings.Join(envs.Names(), ", "))
	}
	if c.datasets == "" {
		return nil, errorf(http.StatusNotFound, CodeUnknownEnv, "this server has no datasets folder (start it with --datasets or NESY_SHARED): environment tasks are not available; send PDDL text instead")
	}
	c.mu.Lock()
	env, ok := c.envs[name]
	if !ok {
		var err error
		env, err = envs.New(name, c.datasets)
		if err != nil {
			c.mu.Unlock()
			return nil, errorf(http.StatusNotFound, CodeUnknownEnv, "environment %s: %s", name, hidePath(err.Error(), c.datasets, "<datasets>"))
		}
		c.envs[name] = env
	}
	c.mu.Unlock()
	known := false
	for _, t := range env.Tasks() {
		if t.ID == task {
			known = true
			break
		}
	}
	if !known {
		return nil, errorf(http.StatusNotFound, CodeUnknownEnv, "environment %s has no task %q", name, task)
	}
	ep, err := env.Open(ctx, task)
	if err != nil {
		return nil, errorf(http.StatusUnprocessableEntity, CodeBadPDDL, "environment %s task %s: %s", name, task, hidePath(err.Error(), c.datasets, "<datasets>"))
	}
	return ep, nil
}
