/** Package installs: the fetch and install commands, running the fetch, finding the installer. */
export * from '../core/packages/install-command.js';
export * from './fetch-packages.js';
export * from './find-installer.js';
