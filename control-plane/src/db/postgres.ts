import pg from 'pg';
import { DatabaseUnavailableError, isDatabaseUnavailable } from './errors.js';
import { INT8_OID, parseInt8, type Database, type SqlParam, type Transaction } from './database.js';

const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID ? parseInt8 : pg.types.getTypeParser(oid, format ?? 'text')) as typeof pg.types.getTypeParser,
};

/** PostgreSQL through a `pg` pool. */
export function openPostgres(connectionString: string, options: { max?: number } = {}): Database {
  const pool = new pg.Pool({
    connectionString,
    max: options.max ?? 10,
    connectionTimeoutMillis: 5_000,
    idleTimeoutMillis: 30_000,
    types,
  });
  // An idle client that loses its server must not crash the process; the next query reports it.
  pool.on('error', () => {});

  const runQuery = async <Row>(client: pg.PoolClient, sql: string, params?: readonly SqlParam[]) => {
    const result = await client.query(sql, params as unknown[] | undefined);
    return result.rows as Row[];
  };
  // A checked-out client has no listener of the pool's: a server that ends the connection while
  // no statement runs on it (a transaction waiting on other work) must not crash the process;
  // the client's next statement fails and reports it.
  const ignoreError = () => {};
  // A failure to get a connection at all means the database is unavailable (503), whatever its code.
  const connect = async (): Promise<pg.PoolClient> => {
    const client = await pool.connect().catch((err: unknown) => {
      throw new DatabaseUnavailableError(err);
    });
    client.on('error', ignoreError);
    return client;
  };
  // A connection that broke is destroyed, not returned to the pool.
  const release = (client: pg.PoolClient, err?: unknown) => {
    client.off('error', ignoreError);
    client.release(err !== undefined && isDatabaseUnavailable(err) ? (err as Error) : undefined);
  };
  const withClient = async <T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> => {
    const client = await connect();
    try {
      const result = await fn(client);
      release(client);
      return result;
    } catch (err) {
      release(client, err);
      throw err;
    }
  };

  // One dedicated connection carries every LISTEN. When it drops it is re-made (backoff up to
  // 5 s), the channels are listened to again, and each handler gets an empty notification:
  // whatever changed meanwhile was missed, so listeners reload.
  const handlers = new Map<string, Set<(payload: string) => void>>();
  let listener: Promise<pg.Client> | undefined;
  let reconnectTimer: NodeJS.Timeout | undefined;
  let closed = false;

  const connectListener = async (): Promise<pg.Client> => {
    const client = new pg.Client({ connectionString, types, connectionTimeoutMillis: 5_000 });
    client.on('notification', (msg) => {
      for (const handler of handlers.get(msg.channel) ?? []) handler(msg.payload ?? '');
    });
    client.on('error', () => dropListener(client));
    client.on('end', () => dropListener(client));
    await client.connect();
    for (const channel of handlers.keys()) await client.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
    return client;
  };

  const ensureListener = (): Promise<pg.Client> => {
    listener ??= connectListener().catch((err: unknown) => {
      listener = undefined;
      throw new DatabaseUnavailableError(err);
    });
    return listener;
  };

  const reconnect = (delayMs: number) => {
    if (closed || reconnectTimer) return;
    reconnectTimer = setTimeout(() => {
      reconnectTimer = undefined;
      ensureListener().then(
        () => {
          for (const set of handlers.values()) for (const handler of set) handler('');
        },
        () => reconnect(Math.min(delayMs * 2, 5_000)),
      );
    }, delayMs);
    reconnectTimer.unref();
  };

  function dropListener(client: pg.Client) {
    void listener?.then((current) => {
      if (current !== client) return;
      listener = undefined;
      reconnect(250);
    }, () => {});
  }

  return {
    kind: 'postgres',
    query: (sql, params) => withClient((client) => runQuery(client, sql, params)),
    async exec(sql) {
      await withClient((client) => client.query(sql));
    },
    async transaction(fn) {
      const client = await connect();
      try {
        await client.query('BEGIN');
        const tx: Transaction = {
          query: (sql, params) => runQuery(client, sql, params),
          async exec(sql) {
            await client.query(sql);
          },
        };
        const result = await fn(tx);
        await client.query('COMMIT');
        release(client);
        return result;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        release(client, err);
        throw err;
      }
    },
    async listen(channel, onNotify) {
      let set = handlers.get(channel);
      if (!set) {
        set = new Set();
        handlers.set(channel, set);
        try {
          const client = await ensureListener();
          await client.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
        } catch (err) {
          handlers.delete(channel);
          throw err;
        }
      }
      set.add(onNotify);
      return async () => {
        set.delete(onNotify);
      };
    },
    async close() {
      closed = true;
      clearTimeout(reconnectTimer);
      const client = await listener?.catch(() => undefined);
      await client?.end().catch(() => {});
      await pool.end();
    },
  };
}
