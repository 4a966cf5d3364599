package serve

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/redis/go-redis/v9"
)

// usesRedisCache: the registry keeps blob descriptors in Redis
// (storage.cache.blobdescriptor: redis).
func usesRedisCache(cfg *configuration.Configuration) bool {
	v, _ := cfg.Storage["cache"]["blobdescriptor"].(string)
	return v == "redis"
}

// redisCache is the Redis of the registry's blob-descriptor cache, as the
// registry connects to it (address, database, credentials, TLS).
type redisCache struct {
	c     redis.UniversalClient
	addrs string
}

func openRedisCache(cfg *configuration.Configuration) (*redisCache, error) {
	o := cfg.Redis.Options
	opts := redis.UniversalOptions{Addrs: o.Addrs, ClientName: o.ClientName, DB: o.DB, Protocol: o.Protocol,
		Username: o.Username, Password: o.Password, SentinelUsername: o.SentinelUsername, SentinelPassword: o.SentinelPassword,
		MasterName: o.MasterName, DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout, MaxRetries: o.MaxRetries}
	if opts.DialTimeout == 0 {
		opts.DialTimeout = 10 * time.Second
	}
	addrs := strings.Join(o.Addrs, ", ")
	if t := cfg.Redis.TLS; t.Certificate != "" || len(t.RootCAs) > 0 {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if t.Certificate != "" {
			cert, err := tls.LoadX509KeyPair(t.Certificate, t.Key)
			if err != nil {
				return nil, fmt.Errorf("redis.tls: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		if len(t.RootCAs) > 0 {
			pool := x509.NewCertPool()
			for _, ca := range t.RootCAs {
				pem, err := os.ReadFile(ca)
				if err != nil {
					return nil, fmt.Errorf("redis.tls.rootcas: %w", err)
				}
				pool.AppendCertsFromPEM(pem)
			}
			tc.RootCAs = pool
		}
		opts.TLSConfig = tc
	}
	if len(o.Addrs) == 0 {
		return nil, fmt.Errorf("storage.cache.blobdescriptor is redis but the redis section names no addrs")
	}
	return &redisCache{c: redis.NewUniversalClient(&opts), addrs: addrs}, nil
}

// checkCache checks, before serving, that the Redis of a blob-descriptor
// cache answers: distribution starts without it and then logs a failed
// lookup for every blob it is asked about, falling back to the storage
// each time, so a mistyped address would go unnoticed but for the logs.
// source names the configuration (as Server.source does).
func checkCache(ctx context.Context, cfg *configuration.Configuration, source string) error {
	if !usesRedisCache(cfg) {
		return nil
	}
	cache, err := openRedisCache(cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", source, err)
	}
	defer cache.c.Close()
	pctx, cancel := context.WithTimeout(ctx, storageProbeTimeout)
	defer cancel()
	if err := cache.ping(pctx); err != nil {
		return fmt.Errorf("%w (%s): start Redis there, or correct redis.addrs", err, source)
	}
	return nil
}

func (r *redisCache) ping(ctx context.Context) error {
	if err := r.c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("the Redis of the blob-descriptor cache (redis.addrs %s) does not answer: %w", r.addrs, err)
	}
	return nil
}

// clear deletes the registry's blob descriptors (distribution's keys
// blobs::DIGEST and repository::NAME::blobs...) and says how many keys it
// deleted. After garbage collection they would tell the registry that
// deleted blobs exist: a HEAD would answer 200 for a blob that is gone, a
// push would skip uploading it and a manifest referencing it would be
// accepted, making an image that cannot be pulled.
func (r *redisCache) clear(ctx context.Context) (int, error) {
	var n atomic.Int64
	each := func(ctx context.Context, c redis.Cmdable) error {
		for _, pattern := range []string{"blobs::*", "repository::*"} {
			var cursor uint64
			for {
				keys, next, err := c.Scan(ctx, cursor, pattern, 500).Result()
				if err != nil {
					return err
				}
				// One DEL a key (a cluster's keys live in different slots),
				// all of a batch in one round trip.
				if len(keys) > 0 {
					if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
						for _, k := range keys {
							p.Del(ctx, k)
						}
						return nil
					}); err != nil {
						return err
					}
					n.Add(int64(len(keys)))
				}
				if cursor = next; cursor == 0 {
					break
				}
			}
		}
		return nil
	}
	var err error
	if cluster, ok := r.c.(*redis.ClusterClient); ok {
		err = cluster.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return each(ctx, c) })
	} else {
		err = each(ctx, r.c)
	}
	if err != nil {
		err = fmt.Errorf("clearing the blob-descriptor cache in Redis (redis.addrs %s): %w", r.addrs, err)
	}
	return int(n.Load()), err
}

func (r *redisCache) close() { _ = r.c.Close() }
