package models

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	ollamamodel "github.com/ollama/ollama/types/model"
)

// ErrNotGGUF is returned for model files that do not start with the GGUF
// magic.
var ErrNotGGUF = errors.New("not a GGUF file")

// ErrModelNotFound is returned when a model file or Ollama model name does
// not exist.
var ErrModelNotFound = errors.New("model not found")

// Store is a local Ollama model store (the folder holding manifests/ and
// blobs/).
type Store struct {
	Root string
}

// DefaultStore returns the store Ollama itself uses: $OLLAMA_MODELS, else
// ~/.ollama/models.
func DefaultStore() Store {
	if d := os.Getenv("OLLAMA_MODELS"); d != "" {
		return Store{Root: d}
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return Store{Root: filepath.Join(".ollama", "models")}
	}
	return Store{Root: filepath.Join(home, ".ollama", "models")}
}

const (
	defaultHost      = "registry.ollama.ai"
	defaultNamespace = "library"
)

var digestRe = regexp.MustCompile(`^sha256[:-]([0-9a-f]{64})$`)

// ModelName is a parsed Ollama model name.
type ModelName struct {
	Host, Namespace, Model, Tag string
}

// ParseModelName parses an Ollama model name ("qwen3:4b", "user/model",
// "host/namespace/model:tag") with Ollama's own parser
// (github.com/ollama/ollama/types/model), filling its defaults (host
// registry.ollama.ai, namespace library, tag latest). A name that is not
// fully qualified once filled is rejected: its parts hold letters, digits,
// '_', '-' and '.' (':' in a host's port) and start with a letter, digit
// or '_', so no part can reach outside the store.
func ParseModelName(name string) (ModelName, error) {
	if strings.Count(name, "/") > 2 || strings.Contains(name, "://") {
		return ModelName{}, fmt.Errorf("invalid model name %q: want [host/][namespace/]model[:tag]", name)
	}
	n := ollamamodel.ParseName(name)
	if !n.IsFullyQualified() {
		return ModelName{}, fmt.Errorf("invalid model name %q: want [host/][namespace/]model[:tag] with parts of letters, digits, '_', '-' and '.'", name)
	}
	return ModelName{Host: n.Host, Namespace: n.Namespace, Model: n.Model, Tag: n.Tag}, nil
}

// String gives the short form Ollama shows: "model:tag" for the library,
// "namespace/model:tag" for other namespaces of the default registry, else
// the full name.
func (n ModelName) String() string {
	switch {
	case n.Host == defaultHost && n.Namespace == defaultNamespace:
		return n.Model + ":" + n.Tag
	case n.Host == defaultHost:
		return n.Namespace + "/" + n.Model + ":" + n.Tag
	}
	return n.Host + "/" + n.Namespace + "/" + n.Model + ":" + n.Tag
}

type manifest struct {
	Layers []struct {
		MediaType string `json:"mediaType"`
		Digest    string `json:"digest"`
		Size      int64  `json:"size"`
	} `json:"layers"`
}

const (
	mediaModel     = "application/vnd.ollama.image.model"
	mediaProjector = "application/vnd.ollama.image.projector"
	mediaTemplate  = "application/vnd.ollama.image.template"
	// maxTemplate bounds a template layer read into memory.
	maxTemplate = 1 << 20
)

// StoreModel is a model in an Ollama store.
type StoreModel struct {
	Name     string    // short name, e.g. "qwen3:4b"
	Path     string    // the GGUF blob
	Digest   string    // "sha256:..."
	Size     int64     // bytes of the model blob
	Modified time.Time // manifest modification time
	// Projector is a separate vision projector blob (llama.cpp-style
	// models); Ollama's Go engine reads vision weights from the model blob
	// itself and cannot use it.
	Projector string
	// Template is the manifest's chat template layer (a Go template in
	// Ollama's syntax), "" when it has none: Load renders chats with it,
	// as Ollama does (Options.ChatTemplate).
	Template string
}

// resolve reads the manifest of a parsed name.
func (s Store) resolve(n ModelName) (StoreModel, error) {
	mpath := filepath.Join(s.Root, "manifests", n.Host, n.Namespace, n.Model, n.Tag)
	data, err := os.ReadFile(mpath)
	if errors.Is(err, fs.ErrNotExist) {
		return StoreModel{}, fmt.Errorf("model %q is not in the Ollama store %s (pull it with `ollama pull`, or give a .gguf path): %w", n.String(), s.Root, ErrModelNotFound)
	}
	if err != nil {
		return StoreModel{}, fmt.Errorf("model %q: %w", n.String(), err)
	}
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return StoreModel{}, fmt.Errorf("model %q: manifest %s: %w", n.String(), mpath, err)
	}
	out := StoreModel{Name: n.String()}
	if st, err := os.Stat(mpath); err == nil {
		out.Modified = st.ModTime()
	}
	blob := func(d string) (string, error) {
		sm := digestRe.FindStringSubmatch(d)
		if sm == nil {
			return "", fmt.Errorf("model %q: manifest %s: bad digest %q", n.String(), mpath, d)
		}
		return filepath.Join(s.Root, "blobs", "sha256-"+sm[1]), nil
	}
	for _, l := range m.Layers {
		switch l.MediaType {
		case mediaModel:
			p, err := blob(l.Digest)
			if err != nil {
				return StoreModel{}, err
			}
			out.Path, out.Digest, out.Size = p, l.Digest, l.Size
		case mediaProjector:
			p, err := blob(l.Digest)
			if err != nil {
				return StoreModel{}, err
			}
			out.Projector = p
		case mediaTemplate:
			p, err := blob(l.Digest)
			if err != nil {
				return StoreModel{}, err
			}
			if l.Size > maxTemplate {
				return StoreModel{}, fmt.Errorf("model %q: template layer of %d bytes", n.String(), l.Size)
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return StoreModel{}, fmt.Errorf("model %q: template layer: %w", n.String(), err)
			}
			out.Template = string(b)
		}
	}
	if out.Path == "" {
		return StoreModel{}, fmt.Errorf("model %q: manifest %s has no model layer", n.String(), mpath)
	}
	return out, nil
}

// Lookup resolves an Ollama model name to its blob.
func (s Store) Lookup(name string) (StoreModel, error) {
	n, err := ParseModelName(name)
	if err != nil {
		return StoreModel{}, err
	}
	return s.resolve(n)
}

// List returns the models in the store, sorted by name. A missing store is
// an empty list; unreadable manifests are skipped.
func (s Store) List() ([]StoreModel, error) {
	root := filepath.Join(s.Root, "manifests")
	var out []StoreModel
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == root {
				return fs.SkipAll
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return nil
		}
		parts := strings.Split(filepath.ToSlash(rel), "/")
		if len(parts) != 4 {
			return nil
		}
		n := ModelName{Host: parts[0], Namespace: parts[1], Model: parts[2], Tag: parts[3]}
		if _, err := ParseModelName(n.Host + "/" + n.Namespace + "/" + n.Model + ":" + n.Tag); err != nil {
			return nil
		}
		m, err := s.resolve(n)
		if err != nil {
			return nil
		}
		if st, err := os.Stat(m.Path); err == nil && m.Size == 0 {
			m.Size = st.Size()
		}
		out = append(out, m)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("models: listing %s: %w", root, err)
	}
	slices.SortFunc(out, func(a, b StoreModel) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// ListOllama lists the models of DefaultStore (for /v1/models and
// /api/tags).
func ListOllama() ([]StoreModel, error) { return DefaultStore().List() }

// looksLikePath says whether a model argument is meant as a file path.
func looksLikePath(name string) bool {
	return strings.HasSuffix(strings.ToLower(name), ".gguf") || filepath.IsAbs(name) ||
		strings.HasPrefix(name, "./") || strings.HasPrefix(name, "../") || strings.HasPrefix(name, "~") ||
		strings.ContainsRune(name, filepath.Separator) && strings.Count(name, "/") > 2
}

// Resolve turns a model argument into a GGUF file: an existing file path,
// or an Ollama model name looked up in DefaultStore. It checks that the
// file exists and starts with the GGUF magic.
func Resolve(name string) (string, error) {
	return DefaultStore().ResolvePath(name)
}

// ResolvePath is Resolve against this store.
func (s Store) ResolvePath(name string) (string, error) {
	m, err := s.ResolveModel(name)
	return m.Path, err
}

// ResolveModel is ResolvePath with the store's record of the model (its
// chat template layer); a file path gives a StoreModel with only Path.
func (s Store) ResolveModel(name string) (StoreModel, error) {
	path, m, err := s.resolveModel(name)
	m.Path = path
	return m, err
}

func (s Store) resolveModel(name string) (string, StoreModel, error) {
	var sm StoreModel
	if name == "" {
		return "", sm, errors.New("models: no model given (a .gguf path or an Ollama model name)")
	}
	path := ""
	if st, err := os.Stat(name); err == nil && !st.IsDir() {
		path = name
	} else if err == nil && st.IsDir() {
		return "", sm, fmt.Errorf("models: %s is a directory, not a GGUF file", name)
	} else if looksLikePath(name) {
		return "", sm, fmt.Errorf("models: model file %s: %w", name, ErrModelNotFound)
	} else {
		m, err := s.Lookup(name)
		if err != nil {
			return "", sm, fmt.Errorf("models: %w", err)
		}
		path, sm = m.Path, m
	}
	if err := CheckGGUF(path); err != nil {
		return "", sm, fmt.Errorf("models: %w", err)
	}
	return path, sm, nil
}

// CheckGGUF checks that path is a readable file starting with the GGUF
// magic.
func CheckGGUF(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("model file %s: %w", path, ErrModelNotFound)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	var magic [4]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil || string(magic[:]) != "GGUF" {
		return fmt.Errorf("%s: %w", path, ErrNotGGUF)
	}
	return nil
}
