import { useRef, useState } from "react";
import { flexRender, getCoreRowModel, useReactTable, type ColumnDef } from "@tanstack/react-table";

type Props<T> = {
  label: string;
  data: T[];
  columns: ColumnDef<T, unknown>[];
  rowId: (row: T) => string;
  onOpen: (row: T) => void;
  selectedId?: string | null;
  testId?: string;
};

/**
 * A keyboard-navigable table: Arrow keys move between rows, Enter or Space opens one, Home/End
 * jump. Rows are buttons to assistive technology (role="row" with aria-selected).
 */
export function DataTable<T>({ label, data, columns, rowId, onOpen, selectedId, testId }: Props<T>) {
  const table = useReactTable({ data, columns, getCoreRowModel: getCoreRowModel(), getRowId: rowId });
  const [active, setActive] = useState(0);
  const body = useRef<HTMLTableSectionElement>(null);

  const focusRow = (index: number) => {
    const rows = body.current?.querySelectorAll<HTMLTableRowElement>("tr");
    if (!rows || rows.length === 0) return;
    const clamped = Math.max(0, Math.min(rows.length - 1, index));
    setActive(clamped);
    rows[clamped].focus();
  };

  const onKeyDown = (event: React.KeyboardEvent, index: number, row: T) => {
    switch (event.key) {
      case "ArrowDown":
        event.preventDefault();
        focusRow(index + 1);
        break;
      case "ArrowUp":
        event.preventDefault();
        focusRow(index - 1);
        break;
      case "Home":
        event.preventDefault();
        focusRow(0);
        break;
      case "End":
        event.preventDefault();
        focusRow(data.length - 1);
        break;
      case "Enter":
      case " ":
        event.preventDefault();
        onOpen(row);
        break;
    }
  };

  return (
    <table className="table" aria-label={label} data-testid={testId}>
      <thead>
        {table.getHeaderGroups().map((group) => (
          <tr key={group.id}>
            {group.headers.map((header) => (
              <th key={header.id} scope="col">
                {flexRender(header.column.columnDef.header, header.getContext())}
              </th>
            ))}
          </tr>
        ))}
      </thead>
      <tbody ref={body}>
        {table.getRowModel().rows.map((row, index) => (
          <tr
            key={row.id}
            data-row-id={row.id}
            tabIndex={index === active ? 0 : -1}
            aria-selected={row.id === selectedId}
            className={row.id === selectedId ? "selected" : undefined}
            onClick={() => {
              setActive(index);
              onOpen(row.original);
            }}
            onKeyDown={(e) => onKeyDown(e, index, row.original)}
          >
            {row.getVisibleCells().map((cell) => (
              <td key={cell.id}>{flexRender(cell.column.columnDef.cell, cell.getContext())}</td>
            ))}
          </tr>
        ))}
      </tbody>
    </table>
  );
}
