/** Package installs: the installer command, and finding the installer. */
export * from './install-command.js';
export * from './find-installer.js';
