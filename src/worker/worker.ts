/**
 * A worker process assembled: startup checks, checkpoints, the container pool, the gRPC server
 * (ExecutionService and health), registration, the utilization heartbeat, graceful shutdown.
 */
import { mkdir, readdir, rm } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Server } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { ExecutionServiceService } from '../proto/gen/readie/v1/execution.js';
import { Flavor, WorkerStatus, type ReportStatusRequest } from '../proto/gen/readie/v1/registry.js';
import { selectBackend } from './backend-selection.js';
import { checkpointsFor, loadCatalogue, type RestoreBackend } from './checkpoints/index.js';
import { ContainerPool, type ContainerReport } from './containers/index.js';
import { WorkerStartupError } from './errors.js';
import { CallTracker, executionService } from './execution/index.js';
import { ExecutorConnection } from './executor-link/index.js';
import { WorkerHealth } from './health.js';
import { CpuSampler, probePython } from './machine.js';
import { advertisedAddress, type WorkerOptions } from './options.js';
import { findInstaller, type Installer } from './packages/index.js';
import { RegistryClient } from './registry/index.js';
import { MemoryCgroups, SANDBOX_WHEEL_DIR, socketPathProblem } from './sandbox/index.js';
import { routerCredentials, serverCredentials } from './transport.js';

/** Knobs that are not flags: retry timings and startup checks (tests shorten them). */
export interface WorkerTuning {
  /** Registration retries after the first attempt while the router is unreachable. */
  readonly registerRetries: number;
  readonly registerRetryDelayMs: number;
  /** Deadline of each report to the router. */
  readonly reportTimeoutMs: number;
  /** How long a checkpoint template may take to import its modules. */
  readonly templateBuildTimeoutMs: number;
  /** First delay before a dead template is rebuilt. */
  readonly templateRebuildDelayMs: number;
  /** Deadline of the CRIU probe's dump and restore. */
  readonly criuProbeTimeoutMs: number;
  /** Start and stop one cold container at startup to prove the sandbox works. */
  readonly sandboxSelfTest: boolean;
}

/** The defaults of WorkerTuning. */
export const DEFAULT_TUNING: WorkerTuning = {
  registerRetries: 3,
  registerRetryDelayMs: 1_000,
  reportTimeoutMs: 5_000,
  templateBuildTimeoutMs: 120_000,
  templateRebuildDelayMs: 5_000,
  criuProbeTimeoutMs: 30_000,
  sandboxSelfTest: true,
};

const SELF_TEST_MEMORY = 256 * 1024 * 1024;

/** A running worker. */
export class Worker {
  private readonly calls = new CallTracker();
  private readonly health = new WorkerHealth();
  private readonly cpu = new CpuSampler();
  private utilizationTimer: NodeJS.Timeout | null = null;
  private statusReports: Promise<void> = Promise.resolve();
  private reportContainers = false;
  private stopping: Promise<void> | null = null;
  /** host:port reported to the router. */
  address = '';
  /** The port the server is bound to. */
  port = 0;
  /** READY, or ERROR with `problem` saying why. */
  status: WorkerStatus = WorkerStatus.WORKER_STATUS_READY;
  problem = '';
  pythonVersion = '';
  backend: RestoreBackend | null = null;
  pool: ContainerPool | null = null;
  private cgroups: MemoryCgroups | null = null;
  private server: Server | null = null;
  private registry: RegistryClient | null = null;

  private constructor(
    readonly options: WorkerOptions,
    readonly log: Logger,
    private readonly tuning: WorkerTuning,
  ) {}

  /** Starts a worker: checks, checkpoints, server, registration. Throws if it cannot register. */
  static async start(
    options: WorkerOptions,
    log: Logger,
    tuning: Partial<WorkerTuning> = {},
  ): Promise<Worker> {
    const worker = new Worker(options, log, { ...DEFAULT_TUNING, ...tuning });
    try {
      await worker.boot();
    } catch (error) {
      await worker.stop({ report: false }).catch(() => undefined);
      throw error;
    }
    return worker;
  }

  private async boot(): Promise<void> {
    const { options, log, tuning } = this;
    const problems: string[] = [];
    const python = await probePython(options.python);
    if (python.ok) this.pythonVersion = python.version;
    else problems.push(python.problem);

    const catalogue = options.cataloguePath ? await loadCatalogue(options.cataloguePath) : null;
    let installer: Installer;
    try {
      installer = await findInstaller(options.installer, process.env['PATH'] ?? '/usr/bin:/bin');
    } catch (error) {
      throw new WorkerStartupError((error as Error).message);
    }

    const socketProblem = socketPathProblem(options.stateDir, 'c-0123456789');
    if (socketProblem) throw new WorkerStartupError(socketProblem);
    try {
      await mkdir(join(options.stateDir, 'containers'), { recursive: true, mode: 0o700 });
      for (const leftover of await readdir(join(options.stateDir, 'containers'))) {
        await rm(join(options.stateDir, 'containers', leftover), { recursive: true, force: true });
      }
    } catch (error) {
      problems.push(
        `the state directory ${options.stateDir} is unusable: ${(error as Error).message}`,
      );
    }
    try {
      this.cgroups = await MemoryCgroups.open(options.cgroupParent);
      const stale = await this.cgroups.removeStale();
      if (stale.length > 0)
        log.warn({ containers: stale }, 'removed containers left by an earlier run');
    } catch (error) {
      problems.push((error as Error).message);
    }

    if (problems.length === 0) {
      this.backend = await selectBackend(options.restoreBackend, {
        python: options.python,
        log,
        cgroups: this.cgroups!,
        stateDir: options.stateDir,
        sandboxUid: options.sandboxUid,
        sandboxGid: options.sandboxGid,
        workerId: options.workerId,
        buildTimeoutMs: tuning.templateBuildTimeoutMs,
        rebuildDelayMs: tuning.templateRebuildDelayMs,
        probeTimeoutMs: tuning.criuProbeTimeoutMs,
      });
      log.info({ restoreBackend: this.backend.description }, 'restore backend chosen');
      const wanted = checkpointsFor(catalogue, options.flavor);
      const built = await Promise.allSettled(wanted.map((spec) => this.backend!.build(spec)));
      built.forEach((result, index) => {
        if (result.status === 'rejected') {
          log.error(
            { checkpointId: wanted[index]!.id, err: (result.reason as Error).message },
            'checkpoint not built: calls naming it start cold',
          );
        }
      });
      this.pool = new ContainerPool({
        workerId: options.workerId,
        stateDir: options.stateDir,
        maxContainers: options.config.WORKER_MAX_EXECUTORS,
        uid: options.sandboxUid,
        gid: options.sandboxGid,
        python: options.python,
        wheelDir: options.wheelDir,
        cgroups: this.cgroups!,
        backend: this.backend,
        idleTtlMs: options.config.EXECUTOR_TTL,
        standbyPerCheckpoint: options.standbyPerCheckpoint,
        standbyMemory: options.config.DEFAULT_MEMORY,
        dialTimeoutMs: options.config.DIAL_TOTAL_TIMEOUT,
        report: (report) => this.onContainerReport(report),
        log,
      });
      if (tuning.sandboxSelfTest) {
        const failure = await this.selfTest();
        if (failure) problems.push(failure);
      }
    }
    if (problems.length > 0) {
      this.status = WorkerStatus.WORKER_STATUS_ERROR;
      this.problem = problems.join('; ');
      log.error({ problem: this.problem }, 'the worker cannot run containers');
    }

    await this.serve(installer);
    const credentials = await routerCredentials(options.security);
    this.registry = new RegistryClient({
      router: options.router,
      credentials,
      authToken: options.authToken,
      log,
      registerRetries: tuning.registerRetries,
      registerRetryDelayMs: tuning.registerRetryDelayMs,
      callTimeoutMs: tuning.reportTimeoutMs,
    });
    this.registry.onUnregistered = () =>
      this.reportStatusAgain('the router does not know this worker');
    await this.registry.register(this.statusRequest());
    this.reportContainers = true;
    if (this.status === WorkerStatus.WORKER_STATUS_READY) {
      this.health.set('SERVING');
      this.backend?.onChange(() => {
        this.pool?.refreshStandbys();
        this.reportStatusAgain('its checkpoints changed');
      });
      this.pool?.startReaper();
      this.pool?.refreshStandbys();
    }
    this.startUtilization();
  }

  /** Starts and stops one cold container; returns what failed, or null. */
  private async selfTest(): Promise<string | null> {
    const pool = this.pool!;
    try {
      const { container } = await pool.create(SELF_TEST_MEMORY, '');
      try {
        const connection = await ExecutorConnection.dial(container.paths.socket, {
          timeoutMs: this.options.config.DIAL_TOTAL_TIMEOUT,
        });
        connection.close();
        if (!connection.hello.dns.ok) {
          this.log.warn({ dns: connection.hello.dns.detail }, 'DNS does not work in the sandbox');
        }
      } finally {
        await pool.destroy(container);
      }
      return null;
    } catch (error) {
      return `the sandbox does not start: ${(error as Error).message}`;
    }
  }

  private async serve(installer: Installer): Promise<void> {
    const { options, log } = this;
    const server = new Server();
    this.server = server;
    const unusable = () =>
      this.status === WorkerStatus.WORKER_STATUS_ERROR
        ? `this worker is in error: ${this.problem}`
        : null;
    server.addService(
      ExecutionServiceService,
      executionService({
        workerId: options.workerId,
        pool: () => this.pool,
        python: options.python,
        installer,
        packageSource: {
          indexUrl: options.packageIndex,
          wheelDir: options.wheelDir ? SANDBOX_WHEEL_DIR : null,
        },
        dialTimeoutMs: options.config.DIAL_TOTAL_TIMEOUT,
        executionTimeoutMs: options.config.EXECUTION_TIMEOUT,
        log,
        header: {
          workerId: options.workerId,
          defaultMemory: options.config.DEFAULT_MEMORY,
          sandboxPython: this.pythonVersion,
        },
        calls: this.calls,
        authToken: options.authToken,
        unusable,
      }),
    );
    this.health.addTo(server);
    const credentials = await serverCredentials(options.security);
    this.port = await new Promise<number>((resolve, reject) =>
      server.bindAsync(options.listen, credentials, (error, port) =>
        error
          ? reject(new WorkerStartupError(`cannot listen on ${options.listen}: ${error.message}`))
          : resolve(port),
      ),
    );
    this.address = advertisedAddress(options.advertise, options.listen, this.port, hostname());
    log.info(
      { listen: options.listen, address: this.address },
      'serving ExecutionService and health',
    );
  }

  /** The status report as of now. */
  statusRequest(status: WorkerStatus = this.status): ReportStatusRequest {
    const { options } = this;
    return {
      workerId: options.workerId,
      address: this.address,
      status,
      error: status === WorkerStatus.WORKER_STATUS_ERROR ? this.problem : '',
      flavor: options.flavor === 'gpu' ? Flavor.FLAVOR_GPU : Flavor.FLAVOR_CPU,
      memoryTotal: options.memoryTotal,
      maxContainers: options.config.WORKER_MAX_EXECUTORS,
      gpuMemoryTotal: options.gpuMemoryTotal,
      checkpoints:
        this.status === WorkerStatus.WORKER_STATUS_READY ? (this.backend?.held() ?? []) : [],
      pythonVersion: this.pythonVersion,
      restoreBackend: this.backend?.description ?? '',
    };
  }

  private reportStatusAgain(why: string): void {
    if (this.stopping || !this.registry) return;
    const registry = this.registry;
    this.statusReports = this.statusReports.then(async () => {
      if (this.stopping) return;
      try {
        await registry.reportStatus(this.statusRequest());
        this.log.info({ why, checkpoints: this.backend?.held() ?? [] }, 'reported status again');
      } catch (error) {
        this.log.warn({ why, error: (error as Error).message }, 'status report failed');
      }
    });
  }

  private onContainerReport(report: ContainerReport): void {
    if (!this.reportContainers || !this.registry) return;
    this.registry.reportContainerState({ workerId: this.options.workerId, ...report });
  }

  private startUtilization(): void {
    let running = false;
    this.utilizationTimer = setInterval(() => {
      if (running || !this.registry) return;
      running = true;
      void this.reportUtilization().finally(() => (running = false));
    }, this.options.config.WORKER_UTILIZATION_INTERVAL);
    this.utilizationTimer.unref();
  }

  private async reportUtilization(): Promise<void> {
    try {
      const registered = await this.registry!.reportUtilization({
        workerId: this.options.workerId,
        memoryUsed: (await this.pool?.memoryUsed()) ?? 0,
        containerCount: this.pool?.count ?? 0,
        cpuUsed: this.cpu.sample(),
        cpuTotal: this.cpu.total,
        gpuMemoryUsed: 0,
      });
      if (!registered) this.reportStatusAgain('the router does not know this worker');
    } catch (error) {
      this.log.warn({ error: (error as Error).message }, 'utilization report failed');
    }
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
    if (this.utilizationTimer) clearInterval(this.utilizationTimer);
    const registry = this.registry;
    if (report && registry) {
      await this.statusReports;
      try {
        await registry.reportStatus(this.statusRequest(WorkerStatus.WORKER_STATUS_REMOVED));
        log.info('reported REMOVED to the router');
      } catch (error) {
        log.warn({ error: (error as Error).message }, 'could not report REMOVED');
      }
    }
    log.info({ running: this.calls.size }, 'waiting for running calls to finish');
    await this.calls.drain();
    await this.pool?.close();
    await registry?.flush();
    await this.backend?.close();
    const server = this.server;
    if (server) {
      await Promise.race([
        new Promise<void>((resolve) => server.tryShutdown(() => resolve())),
        sleep(5_000).then(() => server.forceShutdown()),
      ]);
    }
    await this.cgroups?.close();
    registry?.close();
    log.info('worker stopped');
  }
}
