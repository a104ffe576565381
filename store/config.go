package store

import (
	"net/url"
	"strings"
	"time"

	"github.com/helpdesk-dev/helpdesk/settings"
)

// Config is where PostgreSQL is and how long connecting to it may take.
type Config struct {
	URL            string
	ConnectTimeout time.Duration
}

// Settings declares DATABASE_URL and HELPDESK_DB_CONNECT_TIMEOUT.
func (c *Config) Settings() []settings.Setting {
	return []settings.Setting{
		settings.Func("DATABASE_URL", "database-url", "",
			"PostgreSQL: a postgres:// URL or a key=value string such as `host=/run/postgresql dbname=helpdesk`; "+
				"the pool holds 40 connections unless the URL says pool_max_conns=N; required",
			func(v string) error {
				if strings.Contains(v, "://") {
					u, err := url.Parse(v)
					if err != nil || (!strings.EqualFold(u.Scheme, "postgres") && !strings.EqualFold(u.Scheme, "postgresql")) {
						return settings.Wantf("a URL such as postgres://host/…, of scheme postgres or postgresql")
					}
				}
				c.URL = v
				return nil
			}),
		settings.Duration(&c.ConnectTimeout, "HELPDESK_DB_CONNECT_TIMEOUT", "db-connect-timeout", "10s",
			"connecting to PostgreSQL, its first answer included, for every command; past it the command fails naming the database"),
	}
}
