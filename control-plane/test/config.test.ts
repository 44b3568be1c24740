import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import t from 'tap';
import { ConfigError, loadConfig } from '../src/config.js';

const run = promisify(execFile);

/** What loadConfig refuses in `env`, one line per problem; none when it loads. */
function problems(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
    return [];
  } catch (err) {
    return (err as ConfigError).problems;
  }
}

t.test('defaults', async (t) => {
  const config = loadConfig({});
  t.equal(config.port, 8080);
  t.equal(config.environment, 'local');
  t.equal(config.chainId, 4663);
  t.equal(config.databaseUrl, undefined, 'PGlite unless DATABASE_URL is set');
  t.equal(config.dataDir, '.gpufarm');
  t.equal(config.migrateOnStart, true, 'migrations applied at start unless told otherwise');
  t.equal(loadConfig({ GF_MIGRATE_ON_START: 'false' }).migrateOnStart, false);
  t.equal(config.publicUrl, 'http://127.0.0.1:8080');
  t.equal(config.stableToken, null);
  t.same(loadConfig({ GF_BANNED_IMAGES: ' acme/tool , evil/* ' }).bannedImages, ['acme/tool', 'evil/*']);
  t.equal(config.execution.logRetentionDays, 30);
  t.equal(loadConfig({ GF_LOG_RETENTION_DAYS: '7' }).execution.logRetentionDays, 7);
  t.equal(config.rateLimitStore, 'memory', 'limits in memory, per process');
  t.equal(config.redisUrl, null);
});

t.test('rate limits: in memory unless GF_REDIS_URL names a Redis; never in the database', async (t) => {
  t.equal(loadConfig({ DATABASE_URL: 'postgres://h/db' }).rateLimitStore, 'memory', 'on PostgreSQL too: requests do not write the database');
  const shared = loadConfig({ DATABASE_URL: 'postgres://h/db', GF_REDIS_URL: 'redis://:pw@cache:6379/2' });
  t.equal(shared.rateLimitStore, 'redis', 'a Redis named: replicas share their limits');
  t.equal(shared.redisUrl?.reveal(), 'redis://:pw@cache:6379/2');
  t.notMatch(JSON.stringify(shared.redisUrl), /:pw@/, 'the URL (it may hold a password) never serialises');
  t.equal(loadConfig({ GF_REDIS_URL: 'rediss://cache:6380', GF_RATE_LIMIT_STORE: 'memory' }).rateLimitStore, 'memory', 'unless told otherwise');
  t.equal(loadConfig({ GF_REDIS_URL: 'redis://cache', GF_RATE_LIMIT_STORE: 'redis' }).rateLimitStore, 'redis');

  t.match(problems({ GF_RATE_LIMIT_STORE: 'redis' }), ['GF_REDIS_URL: must be set when GF_RATE_LIMIT_STORE is redis (got null)']);
  t.match(problems({ GF_RATE_LIMIT_STORE: 'postgres' }), [/^GF_RATE_LIMIT_STORE: must be memory or redis \(the PostgreSQL store is gone.*GF_REDIS_URL\) \(got "postgres"\)$/]);
  const wrong = problems({ GF_REDIS_URL: 'http://:secret@cache:6379' });
  t.match(wrong, [/^GF_REDIS_URL: must be a redis:\/\/ or rediss:\/\/ URL \(got \[redacted\]\)$/]);
});

t.test('artifact store: the filesystem by default, S3 from the GF_S3_* variables', async (t) => {
  t.equal(loadConfig({}).execution.s3, null);
  t.equal(loadConfig({ GF_S3_BUCKET: 'gf-artifacts' }).execution.s3, null, 'the bucket alone does not switch the store');
  const s3 = loadConfig({
    GF_ARTIFACT_STORE: 's3',
    GF_S3_ENDPOINT: 'http://127.0.0.1:4568',
    GF_S3_BUCKET: 'gf-artifacts',
    GF_S3_ACCESS_KEY_ID: 'AKID',
    GF_S3_SECRET_ACCESS_KEY: 'very-secret',
    GF_S3_FORCE_PATH_STYLE: 'true',
  }).execution.s3;
  t.match(s3, { endpoint: 'http://127.0.0.1:4568', bucket: 'gf-artifacts', region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: 'AKID' } });
  t.equal(s3?.credentials?.secretAccessKey.reveal(), 'very-secret');
  t.notMatch(JSON.stringify(s3), /very-secret/, 'the secret key never serialises');
  t.match(loadConfig({ GF_ARTIFACT_STORE: 's3', GF_S3_BUCKET: 'b-1' }).execution.s3, { endpoint: null, credentials: null, forcePathStyle: false }, "AWS's endpoint and the SDK's credential chain");

  t.match(problems({ GF_ARTIFACT_STORE: 's3' }), [/^GF_S3_BUCKET: must be set/]);
  t.match(problems({ GF_ARTIFACT_STORE: 's3', GF_S3_BUCKET: 'b-1', GF_S3_ACCESS_KEY_ID: 'AKID' }), [/^GF_S3_ACCESS_KEY_ID: must be set together with GF_S3_SECRET_ACCESS_KEY/]);
});

t.test('limits: the agents keep half the connections unless told; per-account caps', async (t) => {
  const config = loadConfig({});
  t.equal(config.maxConnections, 10_000);
  t.equal(config.agentReservedConnections, 5_000);
  t.equal(loadConfig({ GF_MAX_CONNECTIONS: '3' }).agentReservedConnections, 1);
  t.equal(loadConfig({ GF_AGENT_RESERVED_CONNECTIONS: '0' }).agentReservedConnections, 0);
  t.same(config.accountLimits, { logStreams: 20, apiKeys: 25, sessions: 10 });
  t.equal(config.execution.maxPendingUpgrades, 256);
  t.equal(config.execution.agentHandshakeMs, 10_000);
  t.throws(() => loadConfig({ GF_MAX_CONNECTIONS: '100', GF_AGENT_RESERVED_CONNECTIONS: '100' }), /GF_AGENT_RESERVED_CONNECTIONS: must be less than GF_MAX_CONNECTIONS \(100\)/);
});

t.test('error: a bad value names the variable', async (t) => {
  const cases: [string, string][] = [
    ['PORT', 'eighty'],
    ['GF_ENVIRONMENT', 'staging'],
    ['DATABASE_URL', 'mysql://x'],
    ['GF_PLATFORM_FEE_BPS', '12.5'],
    ['GF_TRUST_PROXY', 'maybe'],
    ['GF_MIGRATE_ON_START', 'yes'],
    ['GF_ADMIN_TOKEN', 'short'],
    ['GF_STABLE_TOKEN_ADDRESS', '0x123'],
    ['GF_BANNED_IMAGES', 'acme/tool, *'],
    ['GF_LOG_RETENTION_DAYS', '0'],
    ['GF_WEI_PER_USD', '1.5'],
    ['GF_ARTIFACT_STORE', 'gcs'],
    ['GF_S3_ENDPOINT', 'ftp://s3.local'],
    ['GF_S3_BUCKET', 'Not_A_Bucket'],
    ['GF_S3_FORCE_PATH_STYLE', 'yes'],
    ['GF_AGENT_RESERVED_CONNECTIONS', '10000'],
    ['GF_SESSIONS_PER_ACCOUNT', '0'],
  ];
  for (const [name, value] of cases) {
    const err = (() => {
      try {
        loadConfig({ [name]: value });
        return null;
      } catch (e) {
        return e;
      }
    })();
    t.ok(err instanceof ConfigError, `${name}: a ConfigError`);
    t.match((err as Error).message, name, `${name}: the message names it`);
    t.equal((err as ConfigError).problems.length, 1, `${name}: one problem`);
  }
});

t.test('error: the process stops with a message naming the variable', async (t) => {
  const main = new URL('../src/main.ts', import.meta.url).pathname;
  const err = await run(process.execPath, ['--import', 'tsx', main], { env: { ...process.env, PORT: 'eighty', GF_ENVIRONMENT: 'staging' } }).catch((e: unknown) => e);
  const failure = err as { code: number; stderr: string };
  t.equal(failure.code, 1);
  t.match(failure.stderr, /PORT/);
  t.match(failure.stderr, /GF_ENVIRONMENT/);
  t.notMatch(failure.stderr, /at .*\.ts:\d+/, 'a message, not a stack trace');
});
