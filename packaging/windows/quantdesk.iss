; Inno Setup script for QuantDesk on Windows (x64). UNTESTED: written on Linux, where it cannot run.
;
; Build (on Windows, from the repository root, with Inno Setup 6 and a venv holding ".[llama,packaging]"):
;   set CMAKE_ARGS=-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON -DCMAKE_INSTALL_BINDIR=llama_cpp/lib
;   pip install --force-reinstall --no-cache-dir --no-deps llama-cpp-python==<the venv's version>
;          (llama.cpp for every x64 CPU, app/runtimes/cpu_variants.py; bundle_runtimes.py refuses pip's default build)
;   python -m PyInstaller --noconfirm --clean --distpath dist --workpath build\pyinstaller packaging\quantdesk.spec
;   python -m app.cli runtime build vulkan     (the Vulkan SDK installed: VULKAN_SDK is set by its installer)
;   python -m app.cli runtime build cuda       (the CUDA 12 toolkit installed: nvcc on PATH)
;   python packaging\bundle_runtimes.py dist\quantdesk cpu=env vulkan=%LOCALAPPDATA%\QuantDesk\runtimes\vulkan ^
;          cuda=%LOCALAPPDATA%\QuantDesk\runtimes\cuda
;   iscc /DAppVersion=0.4.0 packaging\windows\quantdesk.iss
;   iscc /DAppVersion=0.4.0 /DModelsDir=C:\path\to\models packaging\windows\quantdesk.iss   (offline package with models)
; Output: dist\quantdesk-<version>-windows-x64-setup.exe
;
; dist\quantdesk\ holds two programs over one _internal folder (packaging/quantdesk.spec):
;   quantdesk.exe      console: the CLI, and the engine host the app starts per model
;   quantdesk-gui.exe  windowed: what the Start menu and desktop shortcuts start (no console window)
; and the llama.cpp runtimes QuantDesk chooses from per load (app/runtimes): runtimes\cpu, runtimes\vulkan
; (any GPU with a Vulkan driver), runtimes\cuda (CUDA 12, NVIDIA; the CUDA runtime DLLs cudart64_12,
; cublas64_12 and cublasLt64_12 from the toolkit's bin folder must sit in runtimes\cuda\site\llama_cpp\lib).

#ifndef AppVersion
  #define AppVersion "0.4.0"
#endif
#define AppName "QuantDesk"
#define SourceDir "..\..\dist\quantdesk"

[Setup]
; A fixed AppId keeps upgrades and uninstall tied to one entry; never change it.
AppId={{6D2B7E7A-3C4F-4E1B-9A55-51A0C3D1F0B7}
AppName={#AppName}
AppVersion={#AppVersion}
AppPublisher=QuantDesk developers
DefaultDirName={autopf}\{#AppName}
DefaultGroupName={#AppName}
DisableProgramGroupPage=yes
; Per-user install by default (no admin prompt); the user may choose all users.
PrivilegesRequired=lowest
PrivilegesRequiredOverridesAllowed=dialog
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
; Windows 10 1809 or newer: Qt 6 and llama.cpp's prebuilt wheels need it.
MinVersion=10.0.17763
OutputDir=..\..\dist
OutputBaseFilename=quantdesk-{#AppVersion}-windows-x64-setup
SetupIconFile=..\..\resources\icons\quantdesk.ico
UninstallDisplayIcon={app}\quantdesk-gui.exe
Compression=lzma2/max
SolidCompression=yes
WizardStyle=modern
; Adds {app} to PATH below; tell running programs.
ChangesEnvironment=yes

[Tasks]
Name: "desktopicon"; Description: "{cm:CreateDesktopIcon}"; GroupDescription: "{cm:AdditionalIcons}"; Flags: unchecked
Name: "addtopath"; Description: "Add the quantdesk command to PATH"; GroupDescription: "Command line:"

[Files]
Source: "{#SourceDir}\*"; DestDir: "{app}"; Flags: ignoreversion recursesubdirs createallsubdirs
#ifdef ModelsDir
; Offline package: the models ride along; `quantdesk import "{app}\models" --watch` adds them to the library.
Source: "{#ModelsDir}\*"; DestDir: "{app}\models"; Flags: ignoreversion recursesubdirs createallsubdirs
#endif

[Icons]
Name: "{group}\{#AppName}"; Filename: "{app}\quantdesk-gui.exe"
Name: "{group}\{cm:UninstallProgram,{#AppName}}"; Filename: "{uninstallexe}"
Name: "{autodesktop}\{#AppName}"; Filename: "{app}\quantdesk-gui.exe"; Tasks: desktopicon

[Registry]
; PATH for the CLI: per-user (HKCU) for a per-user install, machine-wide (HKLM) for an all-users one.
Root: HKA; Subkey: "{code:EnvironmentKey}"; ValueType: expandsz; ValueName: "Path"; \
    ValueData: "{olddata};{app}"; Tasks: addtopath; Check: NeedsAddPath(ExpandConstant('{app}'))

[Run]
Filename: "{app}\quantdesk-gui.exe"; Description: "{cm:LaunchProgram,{#AppName}}"; Flags: nowait postinstall skipifsilent

[Code]
function EnvironmentKey(Param: String): String;
begin
  if IsAdminInstallMode then
    Result := 'SYSTEM\CurrentControlSet\Control\Session Manager\Environment'
  else
    Result := 'Environment';
end;

function NeedsAddPath(Dir: String): Boolean;
var
  Paths: String;
  RootKey: Integer;
begin
  if IsAdminInstallMode then RootKey := HKEY_LOCAL_MACHINE else RootKey := HKEY_CURRENT_USER;
  if not RegQueryStringValue(RootKey, EnvironmentKey(''), 'Path', Paths) then
  begin
    Result := True;
    exit;
  end;
  Result := Pos(';' + Uppercase(Dir) + ';', ';' + Uppercase(Paths) + ';') = 0;
end;

procedure CurUninstallStepChanged(CurUninstallStep: TUninstallStep);
var
  Paths, Dir: String;
  RootKey, P: Integer;
begin
  if CurUninstallStep <> usPostUninstall then exit;
  if IsAdminInstallMode then RootKey := HKEY_LOCAL_MACHINE else RootKey := HKEY_CURRENT_USER;
  if not RegQueryStringValue(RootKey, EnvironmentKey(''), 'Path', Paths) then exit;
  Dir := ';' + ExpandConstant('{app}');
  P := Pos(Uppercase(Dir), Uppercase(Paths));
  if P > 0 then
  begin
    Delete(Paths, P, Length(Dir));
    RegWriteExpandStringValue(RootKey, EnvironmentKey(''), 'Path', Paths);
  end;
end;
