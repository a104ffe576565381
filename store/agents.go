package store

import (
	"context"
	"fmt"
	"time"
)

// Agent is a support agent.
type Agent struct {
	Name        string // the NAME of agent:NAME
	DisplayName string
	Email       string
	CreatedAt   time.Time
}

// UpsertAgentParams are an agent's fields.
type UpsertAgentParams struct {
	Name        string
	DisplayName string
	Email       string
}

// UpsertAgent adds the agent, or updates its name and email.
func (s *Store) UpsertAgent(ctx context.Context, p *UpsertAgentParams) error {
	_, err := s.db.Exec(ctx,
		`INSERT INTO agents (name, display_name, email) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO UPDATE SET display_name = EXCLUDED.display_name, email = EXCLUDED.email`,
		p.Name, p.DisplayName, p.Email)
	if err != nil {
		return fmt.Errorf("upsert agent %s: %w", p.Name, interpretError(err))
	}
	return nil
}

// GetAgent returns the agent with the given name, or ErrNotFound.
func (s *Store) GetAgent(ctx context.Context, name string) (*Agent, error) {
	var a Agent
	err := s.db.QueryRow(ctx, `SELECT name, display_name, email, created_at FROM agents WHERE name = $1`, name).
		Scan(&a.Name, &a.DisplayName, &a.Email, &a.CreatedAt)
	if err != nil {
		return nil, fmt.Errorf("get agent %s: %w", name, interpretError(err))
	}
	return &a, nil
}
