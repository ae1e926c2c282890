/**
 * A worker process assembled: startup checks, checkpoints, the container pool, the gRPC server
 * (ExecutionService and health), registration, the utilization heartbeat, graceful shutdown.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Server } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { decodingService } from '../shared/wire-decoding.js';
import { ExecutionServiceService } from '../proto/gen/readie/v1/execution.js';
import {
  ContainerState,
  Flavor,
  WorkerStatus,
  type ContainerEntry,
  type ReportStatusRequest,
  type ReportUtilizationRequest,
} from '../proto/gen/readie/v1/registry.js';
import { selectBackend } from './backend-selection.js';
import {
  checkpointsFor,
  checkpointTiers,
  loadCatalogue,
  type CheckpointBuild,
  type CheckpointTiers,
  type RestoreBackend,
} from './checkpoints/index.js';
import { ContainerPool, type SandboxContext } from './containers/index.js';
import { WorkerStartAbandoned, WorkerStartupError, WorkerUnusableError } from './core/errors.js';
import { CallTracker, executionService } from './execution/index.js';
import { CallOutputStore } from './output/index.js';
import { WorkerHealth } from './health.js';
import { WorkerCredentials } from './credentials.js';
import { gpuMemoryInUse } from './core/gpu-memory.js';
import { CpuSampler, GpuMemoryReader, probePython } from './machine.js';
import { lockCgroupParent, lockStateDir, type ProcessLock } from './process-lock.js';
import { advertisedAddress, type WorkerOptions } from './options.js';
import { findInstaller, type Installer } from './packages/index.js';
import { RegistryClient } from './registry/index.js';
import { ImageServiceService } from '../proto/gen/readie/v1/images.js';
import {
  ResidencyState,
  ResidencyServiceService,
  type ReportResidencyRequest,
} from '../proto/gen/readie/v1/residency.js';
import type { CheckpointSpec } from '../events/catalogue.js';
import type { ResidencyState as ResidencyStateName } from '../events/schema.js';
import { residencyService, VersionResidency, type VersionState } from './residency/index.js';
import { RouterLink } from './router-link.js';
import {
  heldImagesRequest,
  ImageStore,
  imageReportOf,
  imageService,
  type ImageEvent,
} from './images/index.js';
import {
  SharedIdentity,
  socketPathProblem,
  UidClaims,
  type ContainerCgroups,
  type IdentitySource,
} from './sandbox/index.js';
import {
  findSlirp4netns,
  openCgroups,
  prepareStateDir,
  sandboxSelfTest,
} from './startup-checks.js';
import { checkTransportFiles, routerCredentials, serverCredentials } from './transport.js';

/** Knobs that are not flags: retry timings and startup checks (tests shorten them). */
export interface WorkerTuning {
  /** Registration retries after the first attempt while the router is unreachable. */
  readonly registerRetries: number;
  readonly registerRetryDelayMs: number;
  /** Deadline of each report to the router. */
  readonly reportTimeoutMs: number;
  /** How long a checkpoint may take to build (imports, setup, and a CRIU dump). */
  readonly templateBuildTimeoutMs: number;
  /** First delay before a dead template or a discarded CRIU image is rebuilt. */
  readonly checkpointRebuildDelayMs: number;
  /** Deadline of the CRIU probe's dump and restore. */
  readonly criuProbeTimeoutMs: number;
  /** Start and stop one cold container at startup to prove the sandbox works. */
  readonly sandboxSelfTest: boolean;
  /**
   * The `nvidia-smi` that reads the GPUs' memory in use: a path, null for none; default the one
   * on PATH, if any.
   */
  readonly nvidiaSmi?: string | null;
  /**
   * False runs the sandbox as it was before per-container uids, network, cgroup and devpts
   * namespaces, pids limits and the seccomp filter: the benchmark's baseline, never a product
   * setting.
   */
  readonly sandboxHardening: boolean;
  /**
   * The worker's clock, in epoch ms (default `Date.now`): idle containers expire, versions age
   * and registration waits for a leader by it, and reports' deadlines count from it. Nothing in
   * the worker's policies reads another.
   */
  readonly clock?: () => number;
}

/** The wire's residency states by name. */
const RESIDENCY_STATE_OF: Record<ResidencyStateName, ResidencyState> = {
  loading: ResidencyState.RESIDENCY_STATE_LOADING,
  resident: ResidencyState.RESIDENCY_STATE_RESIDENT,
  cached: ResidencyState.RESIDENCY_STATE_CACHED,
  evicted: ResidencyState.RESIDENCY_STATE_EVICTED,
  failed: ResidencyState.RESIDENCY_STATE_FAILED,
};

/** The defaults of WorkerTuning. */
const DEFAULT_TUNING: WorkerTuning = {
  registerRetries: 3,
  registerRetryDelayMs: 1_000,
  reportTimeoutMs: 5_000,
  templateBuildTimeoutMs: 120_000,
  checkpointRebuildDelayMs: 5_000,
  criuProbeTimeoutMs: 30_000,
  sandboxSelfTest: true,
  sandboxHardening: true,
};

/** The uid of every container on the unhardened benchmark path: nobody. */
const UNHARDENED_IDENTITY = { uid: 65534, gid: 65534 };

/** A running worker. */
export class Worker {
  private readonly calls = new CallTracker();
  private readonly health = new WorkerHealth();
  private readonly cpu = new CpuSampler();
  private stopping: Promise<void> | null = null;
  private cgroups: ContainerCgroups | null = null;
  private server: Server | null = null;
  private router: RouterLink | null = null;
  private gpu: GpuMemoryReader | null = null;
  private bound = { address: '', port: 0 };
  private standing: { status: WorkerStatus; problem: string } = {
    status: WorkerStatus.WORKER_STATUS_READY,
    problem: '',
  };
  private python = '';
  private restoreBackend: RestoreBackend | null = null;
  private containers: ContainerPool | null = null;
  /** This process among every start of the worker: reports name it, so the router tells them apart. */
  readonly instanceId = randomUUID();
  /** The number of the last report taken (each report is numbered when it is made). */
  private reportSeq = 0;
  /** Told when the router refuses this process the worker ID (another live one holds it). */
  private displaced: (message: string) => void = () => undefined;
  /** This process's claims on its state directory and parent cgroup (released at stop). */
  private readonly locks: ProcessLock[] = [];
  private versionResidency: VersionResidency | null = null;
  /** Calls' output kept for `readie logs` (null until the state directory is ready). */
  private output: CallOutputStore | null = null;
  private imageStore: ImageStore | null = null;

  /** The worker's clock (WorkerTuning.clock). */
  private get clock(): () => number {
    return this.tuning.clock ?? Date.now;
  }

  /** host:port reported to the router. */
  get address(): string {
    return this.bound.address;
  }

  /** The port the server is bound to. */
  get port(): number {
    return this.bound.port;
  }

  /** READY, or ERROR with `problem` saying why. */
  get status(): WorkerStatus {
    return this.standing.status;
  }

  /** Why the worker is in ERROR status; empty when it is READY. */
  get problem(): string {
    return this.standing.problem;
  }

  /** The sandbox's Python version. */
  get pythonVersion(): string {
    return this.python;
  }

  /** How checkpoints are restored; null in error status. */
  get backend(): RestoreBackend | null {
    return this.restoreBackend;
  }

  /** The containers; null in error status. */
  get pool(): ContainerPool | null {
    return this.containers;
  }

  /** The versions it holds (docs/tenant-routing.md); null in error status. */
  get versions(): VersionResidency | null {
    return this.versionResidency;
  }

  private constructor(
    readonly options: WorkerOptions,
    readonly log: Logger,
    private readonly tuning: WorkerTuning,
    private readonly credentials: WorkerCredentials,
    private readonly abandon: AbortSignal | undefined,
  ) {}

  /**
   * Starts a worker: checks, checkpoints, server, registration. Throws if it cannot register, and
   * `WorkerStartAbandoned` once `abandon` fires before it has started (between two steps, or while
   * registration waits to retry): what it began is undone.
   */
  static async start(
    options: WorkerOptions,
    log: Logger,
    tuning: Partial<WorkerTuning> = {},
    abandon?: AbortSignal,
  ): Promise<Worker> {
    const credentials = new WorkerCredentials(options.auth);
    for (const warning of credentials.warnings) log.warn(warning);
    if (credentials.mode !== 'tokens') {
      log.warn(
        { auth: credentials.mode },
        credentials.mode === 'none'
          ? 'no credentials: anyone who reaches this port may run calls here (development only)'
          : 'single-token mode: one token for the router, every worker and every client (development only)',
      );
    }
    const worker = new Worker(options, log, { ...DEFAULT_TUNING, ...tuning }, credentials, abandon);
    try {
      await worker.boot();
    } catch (error) {
      await worker.stop({ report: false }).catch(() => undefined);
      throw error;
    }
    return worker;
  }

  private async boot(): Promise<void> {
    const { options, log } = this;
    await checkTransportFiles(options.security);
    const catalogue = options.cataloguePath ? await loadCatalogue(options.cataloguePath) : null;
    const socketProblem = socketPathProblem(options.stateDir, 'c-0123456789');
    if (socketProblem) throw new WorkerStartupError(socketProblem);
    let installer: Installer;
    try {
      installer = await findInstaller(options.installer, process.env['PATH'] ?? '/usr/bin:/bin');
    } catch (error) {
      throw new WorkerStartupError((error as Error).message);
    }

    // Before anything is cleaned up: a second process with this worker's cgroup or state
    // directory must not kill the first one's containers.
    await this.lockResources();
    this.unlessAbandoned();

    const problems: string[] = [];
    const python = await probePython(options.python);
    if (python.ok) this.python = python.version;
    else problems.push(python.problem);
    const state = await prepareStateDir(options.stateDir);
    if ('problem' in state) problems.push(state.problem);
    else {
      this.output = this.openOutput();
      const opened = await openCgroups(options.cgroupParent, state.leftovers, log);
      if ('problem' in opened) problems.push(opened.problem);
      else this.cgroups = opened.cgroups;
    }
    const sandbox = await this.sandboxContext();
    if ('problem' in sandbox) problems.push(sandbox.problem);
    if (problems.length === 0 && !('problem' in sandbox)) {
      const prepared = await this.prepareContainers(
        this.cgroups!,
        sandbox,
        checkpointsFor(catalogue, options.flavor),
      );
      this.unlessAbandoned();
      if ('problem' in prepared) problems.push(prepared.problem);
      else {
        const images = await this.prepareImages(prepared.pool, installer);
        if (images) problems.push(images);
      }
      if (!('problem' in prepared) && this.tuning.sandboxSelfTest) {
        const failure = await sandboxSelfTest(prepared.pool, log);
        if (failure) problems.push(failure);
      }
    }
    if (problems.length > 0) {
      this.standing = { status: WorkerStatus.WORKER_STATUS_ERROR, problem: problems.join('; ') };
      log.error({ problem: this.problem }, 'the worker cannot run containers');
    }
    this.gpu = await GpuMemoryReader.find(process.env['PATH'] ?? '', this.tuning.nvidiaSmi);

    this.unlessAbandoned();
    await this.serve(installer);
    const router = await this.registerWithRouter();
    if (this.status === WorkerStatus.WORKER_STATUS_READY) {
      this.health.set('SERVING');
      this.backend?.onChange(() => {
        this.pool?.refreshStandbys();
        this.versions?.sync();
        this.logTiers();
        this.router?.reportStatusAgain('its checkpoints changed');
      });
      this.pool?.startReaper();
      this.pool?.refreshStandbys();
    }
    router.startUtilization(options.config.WORKER_UTILIZATION_INTERVAL);
  }

  /** Throws `WorkerStartAbandoned` once the start was abandoned (a step in between ends first). */
  private unlessAbandoned(): void {
    if (this.abandon?.aborted) throw new WorkerStartAbandoned('told to stop while starting');
  }

  /** The sandbox policy with the uid claims and, for egress, slirp4netns; or what is missing. */
  private async sandboxContext(): Promise<SandboxContext | { problem: string }> {
    const hardened = this.tuning.sandboxHardening;
    const policy = { ...this.options.sandbox, hardened };
    let identities: IdentitySource;
    try {
      identities = hardened
        ? await UidClaims.open(policy.uids)
        : new SharedIdentity(UNHARDENED_IDENTITY);
    } catch (error) {
      return { problem: `cannot claim sandbox uids: ${(error as Error).message}` };
    }
    if (!hardened || policy.network !== 'egress') return { policy, identities, slirp4netns: null };
    const slirp = await findSlirp4netns();
    if ('problem' in slirp) return slirp;
    return { policy, identities, slirp4netns: slirp.path };
  }

  /** The store of calls' output under the state directory; null (and a warning) when it fails. */
  private openOutput(): CallOutputStore | null {
    const { options } = this;
    try {
      return CallOutputStore.open(
        join(options.stateDir, 'output'),
        {
          maxCallBytes: options.config.OUTPUT_MAX_CALL_BYTES,
          maxTotalBytes: options.config.OUTPUT_MAX_TOTAL_BYTES,
          maxCalls: options.config.OUTPUT_MAX_CALLS,
          retentionMs: options.config.OUTPUT_RETENTION,
        },
        this.clock,
      );
    } catch (error) {
      this.log.warn(
        { err: (error as Error).message },
        "calls' output cannot be kept (readie logs will find none)",
      );
      return null;
    }
  }

  /** Claims the parent cgroup and the state directory for this process (one worker each). */
  private async lockResources(): Promise<void> {
    const { options } = this;
    this.locks.push(await lockCgroupParent(options.cgroupParent, options.workerId));
    const stateLock = await lockStateDir(options.stateDir);
    if (stateLock !== null) this.locks.push(stateLock);
  }

  /** Opens the image store (tenants' images on disk); returns what is wrong, or null. */
  private async prepareImages(pool: ContainerPool, installer: Installer): Promise<string | null> {
    const { options, log } = this;
    const store = new ImageStore({
      dir: join(options.stateDir, 'images'),
      pool,
      python: options.python,
      pythonVersion: this.pythonVersion,
      flavor: options.flavor,
      installer,
      source: { indexUrl: options.packageIndex, wheelDir: options.wheelDir },
      cacheDir: join(options.stateDir, 'package-cache'),
      memory: options.config.DEFAULT_MEMORY,
      capacity: options.imageCacheSize,
      buildTimeoutMs: options.config.EXECUTION_TIMEOUT,
      log,
      clock: this.clock,
      onEvent: (event) => this.onImageEvent(event),
    });
    try {
      await store.load();
    } catch (error) {
      return `cannot read the images under ${options.stateDir}: ${(error as Error).message}`;
    }
    this.imageStore = store;
    return null;
  }

  /** The worker's images, once the pool exists. */
  get images(): ImageStore | null {
    return this.imageStore;
  }

  private onImageEvent(event: ImageEvent): void {
    this.router?.image(imageReportOf(this.options.workerId, event));
  }

  /**
   * Chooses the restore backend, builds the checkpoints, and makes the container pool; returns
   * what is wrong instead when the backend asked for is unusable.
   */
  private async prepareContainers(
    cgroups: ContainerCgroups,
    sandbox: SandboxContext,
    checkpoints: ReturnType<typeof checkpointsFor>,
  ): Promise<{ pool: ContainerPool } | { problem: string }> {
    const { options, log, tuning } = this;
    const backend = await selectBackend(options.restoreBackend, {
      python: options.python,
      log,
      cgroups,
      stateDir: options.stateDir,
      sandbox,
      workerId: options.workerId,
      criu: options.criu,
      buildTimeoutMs: tuning.templateBuildTimeoutMs,
      rebuildDelayMs: tuning.checkpointRebuildDelayMs,
      probeTimeoutMs: tuning.criuProbeTimeoutMs,
    });
    if ('problem' in backend) return backend;
    this.restoreBackend = backend;
    log.info({ restoreBackend: backend.description }, 'restore backend chosen');
    // On-demand checkpoints (tenants' versions) are built when a pre-warm or a cold load asks.
    const atStart = checkpoints.filter((spec) => spec.onDemand !== true);
    const built = await Promise.allSettled(atStart.map((spec) => backend.build(spec)));
    atStart.forEach((spec, index) => {
      const result = built[index];
      if (result?.status === 'rejected') {
        log.error(
          { checkpointId: spec.id, err: (result.reason as Error).message },
          'checkpoint not built: calls naming it start cold',
        );
      }
    });
    this.containers = new ContainerPool({
      workerId: options.workerId,
      stateDir: options.stateDir,
      maxContainers: options.config.WORKER_MAX_EXECUTORS,
      sandbox,
      python: options.python,
      wheelDir: options.wheelDir,
      cgroups,
      backend,
      idleTtlMs: options.config.EXECUTOR_TTL,
      standbyPerCheckpoint: options.standbyPerCheckpoint,
      standbyMax: options.standbyMax,
      memoryTotal: options.memoryTotal,
      standbyMemory: options.config.DEFAULT_MEMORY,
      dialTimeoutMs: options.config.DIAL_TOTAL_TIMEOUT,
      clock: this.clock,
      report: (report) =>
        this.router?.containerState({
          workerId: options.workerId,
          ...report,
          instanceId: this.instanceId,
          reportSeq: this.nextReportSeq(),
        }),
      log,
    });
    this.versionResidency = new VersionResidency({
      workerId: options.workerId,
      specs: new Map<string, CheckpointSpec>(checkpoints.map((spec) => [spec.id, spec])),
      budget: options.residentMemory,
      backend,
      pool: this.containers,
      report: (changed) => this.router?.residency(this.residencyReport(changed)),
      log,
      clock: this.clock,
    });
    this.logTiers();
    return { pool: this.containers };
  }

  /**
   * Each held checkpoint's tiers: `resident` (a template, or standbys kept restored) and
   * `cached` (an image on disk that restores with nothing resident).
   */
  checkpointTiers(): CheckpointTiers[] {
    const { backend, pool } = this;
    if (!backend || !pool) return [];
    return checkpointTiers(
      backend.held(),
      (id) => backend.isResident(id) || pool.keepsStandbys(id),
      (id) => backend.hasImage(id),
    );
  }

  /** A residency report of `versions`, with the budget. */
  private residencyReport(versions: readonly VersionState[]): ReportResidencyRequest {
    return {
      workerId: this.options.workerId,
      residentMemory: this.options.residentMemory ?? undefined,
      versions: versions.map((version) => ({
        checkpointId: version.checkpointId,
        state: RESIDENCY_STATE_OF[version.state],
        error: version.error ?? '',
      })),
    };
  }

  private logTiers(): void {
    this.log.info({ tiers: this.checkpointTiers() }, 'checkpoint tiers');
  }

  /**
   * Builds a checkpoint now (after startup), restocks its standbys and reports the worker's
   * checkpoints again; rejects with the reason it cannot be built.
   */
  async buildCheckpoint(checkpoint: CheckpointBuild): Promise<void> {
    if (!this.backend || !this.pool) {
      throw new WorkerUnusableError(`this worker is in error: ${this.problem}`);
    }
    await this.backend.build(checkpoint);
  }

  /**
   * Frees a checkpoint's resident tier (its standbys, its template): with an image it stays held
   * and restores from disk; without one, calls naming it start cold.
   */
  async dropResident(checkpointId: string): Promise<void> {
    this.pool?.dropStandbys(checkpointId);
    await this.backend?.dropResident(checkpointId);
    this.logTiers();
  }

  /** Keeps standbys of a checkpoint restored again after `dropResident`. */
  keepResident(checkpointId: string): void {
    this.pool?.keepStandbys(checkpointId);
    this.logTiers();
  }

  private async serve(installer: Installer): Promise<void> {
    const { options, log } = this;
    const server = new Server();
    this.server = server;
    server.addService(
      ...decodingService(
        ExecutionServiceService,
        executionService({
          workerId: options.workerId,
          pool: () => this.pool,
          unusable: () =>
            this.status === WorkerStatus.WORKER_STATUS_ERROR
              ? `this worker is in error: ${this.problem}`
              : null,
          python: options.python,
          installer,
          packageSource: { indexUrl: options.packageIndex, wheelDir: options.wheelDir },
          packageCacheDir: join(options.stateDir, 'package-cache'),
          dialTimeoutMs: options.config.DIAL_TOTAL_TIMEOUT,
          executionTimeoutMs: options.config.EXECUTION_TIMEOUT,
          log,
          header: {
            workerId: options.workerId,
            defaultMemory: options.config.DEFAULT_MEMORY,
            sandboxPython: this.pythonVersion,
          },
          calls: this.calls,
          credentials: this.credentials,
          versions: () => this.versions,
          output: () => this.output,
          clock: this.clock,
          images: () => this.imageStore,
        }),
      ),
    );
    server.addService(
      ...decodingService(
        ResidencyServiceService,
        residencyService({
          residency: () => this.versions,
          credentials: this.credentials,
          log: this.log,
        }),
      ),
    );
    server.addService(
      ...decodingService(
        ImageServiceService,
        imageService({
          workerId: options.workerId,
          images: () => this.imageStore,
          credentials: this.credentials,
          log: this.log,
        }),
      ),
    );
    this.health.addTo(server);
    const credentials = await serverCredentials(options.security);
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync(options.listen, credentials, (error, bound) =>
        error
          ? reject(
              new WorkerStartupError(
                `cannot listen on ${options.listen} (${error.message}): ${
                  /EADDRINUSE|No address added/i.test(error.message)
                    ? 'the address is in use: stop what listens there, or pass another --listen'
                    : 'pass an address this host can listen on with --listen'
                }`,
              ),
            )
          : resolve(bound),
      ),
    );
    this.bound = {
      port,
      address: advertisedAddress(options.advertise, options.listen, port, hostname()),
    };
    log.info(
      { listen: options.listen, address: this.address },
      'serving ExecutionService and health',
    );
  }

  private async registerWithRouter(): Promise<RouterLink> {
    const { options, tuning } = this;
    const registry = new RegistryClient({
      router: options.router,
      credentials: await routerCredentials(options.security),
      dialsTls: !options.security.insecure,
      identity: this.credentials,
      log: this.log,
      registerRetries: tuning.registerRetries,
      registerRetryDelayMs: tuning.registerRetryDelayMs,
      callTimeoutMs: tuning.reportTimeoutMs,
      clock: this.clock,
      abandon: this.abandon,
    });
    const router = new RouterLink(
      registry,
      {
        status: () => this.statusRequest(),
        utilization: () => this.utilizationRequest(),
        displaced: (message) => this.leaveDisplaced(message),
        residency: () =>
          this.status === WorkerStatus.WORKER_STATUS_READY && this.versions
            ? this.residencyReport(this.versions.all())
            : null,
        heldImages: () =>
          this.status === WorkerStatus.WORKER_STATUS_READY && this.imageStore
            ? heldImagesRequest(options.workerId, this.imageStore.list())
            : null,
      },
      this.log,
    );
    this.router = router;
    try {
      await router.register();
    } catch (error) {
      this.unlessAbandoned();
      throw error;
    }
    return router;
  }

  /** The next report number: taken in the same turn as what the report says. */
  private nextReportSeq(): number {
    this.reportSeq += 1;
    return this.reportSeq;
  }

  /** Every container held for calls and sessions, as a full report lists it. */
  private containerEntries(): ContainerEntry[] {
    return (this.pool?.held() ?? []).map((held) => ({
      containerId: held.containerId,
      state:
        held.state === 'busy'
          ? ContainerState.CONTAINER_STATE_BUSY
          : ContainerState.CONTAINER_STATE_READY,
      checkpointId: held.checkpointId,
    }));
  }

  /**
   * The load report as of now: a full report, listing every container held, numbered in the same
   * turn as the list is read (the measurements that need waiting are taken first).
   */
  async utilizationRequest(): Promise<ReportUtilizationRequest> {
    const memoryUsed = (await this.pool?.memoryUsed()) ?? 0;
    const gpuReading = (await this.gpu?.read()) ?? null;
    return {
      workerId: this.options.workerId,
      memoryUsed,
      containerCount: this.pool?.count ?? 0,
      cpuUsed: this.cpu.sample(),
      cpuTotal: this.cpu.total,
      gpuMemoryUsed: gpuMemoryInUse(this.pool?.gpuMemoryHeld() ?? 0, gpuReading),
      instanceId: this.instanceId,
      containers: this.containerEntries(),
      standbys: this.pool?.standbyCounts() ?? [],
      reportSeq: this.nextReportSeq(),
    };
  }

  /**
   * Called with the router's refusal, once the worker has stopped, when another live process
   * holds this worker's ID (the router keeps the registration it has): `readie worker` exits.
   */
  onDisplaced(listener: (message: string) => void): void {
    this.displaced = listener;
  }

  /** Another live process holds this worker's ID: stop (without reporting REMOVED for it). */
  private leaveDisplaced(message: string): void {
    this.log.fatal({ problem: message }, 'the router refused this worker process its ID: stopping');
    void this.stop({ report: false })
      .catch(() => undefined)
      .then(() => this.displaced(message));
  }

  /** The status report as of now. */
  statusRequest(status: WorkerStatus = this.status): ReportStatusRequest {
    const { options } = this;
    const ready = this.status === WorkerStatus.WORKER_STATUS_READY;
    return {
      workerId: options.workerId,
      address: this.address,
      status,
      error: status === WorkerStatus.WORKER_STATUS_ERROR ? this.problem : '',
      flavor: options.flavor === 'gpu' ? Flavor.FLAVOR_GPU : Flavor.FLAVOR_CPU,
      memoryTotal: options.memoryTotal,
      maxContainers: options.config.WORKER_MAX_EXECUTORS,
      gpuMemoryTotal: options.gpuMemoryTotal,
      checkpoints: ready ? (this.backend?.held() ?? []) : [],
      pythonVersion: this.pythonVersion,
      restoreBackend: this.backend?.description ?? '',
      instanceId: this.instanceId,
      containers: status === WorkerStatus.WORKER_STATUS_REMOVED ? [] : this.containerEntries(),
      reportSeq: this.nextReportSeq(),
    };
  }

  /**
   * Reads the token files again (SIGHUP in `readie worker`): the new ones are in force for the next
   * call and report. Throws WorkerStartupError naming the file, and keeps the old ones, when bad.
   */
  reloadCredentials(): void {
    this.credentials.reload();
    for (const warning of this.credentials.warnings) this.log.warn(warning);
    this.log.info({ auth: this.credentials.mode }, 'credentials reloaded');
  }

  /**
   * Leaves: reports REMOVED, refuses new calls, lets running calls finish, destroys every
   * container, stops the templates and the server.
   */
  stop(opts: { report?: boolean } = {}): Promise<void> {
    this.stopping ??= this.shutdown(opts.report ?? true);
    return this.stopping;
  }

  private async shutdown(report: boolean): Promise<void> {
    const { log } = this;
    this.health.set('NOT_SERVING');
    // New calls are refused from this moment; the running ones finish.
    const drained = this.calls.drain();
    if (report) await this.router?.leave(this.statusRequest(WorkerStatus.WORKER_STATUS_REMOVED));
    log.info({ running: this.calls.size }, 'waiting for running calls to finish');
    await drained;
    await this.pool?.close();
    // After the pool: no container restored from an image's snapshot runs as its uid any more.
    await this.imageStore?.close();
    await this.router?.close();
    await this.backend?.close();
    const server = this.server;
    if (server) {
      await Promise.race([
        new Promise<void>((resolve) => server.tryShutdown(() => resolve())),
        sleep(5_000).then(() => server.forceShutdown()),
      ]);
    }
    await this.cgroups?.close();
    await Promise.all(this.locks.splice(0).map((lock) => lock.release()));
    log.info('worker stopped');
  }
}
